// Package pace spaces out the syncs of one key while changes to it keep
// coming, for controllers whose sync of a key costs in proportion to its
// size (a Service's endpoint controllers recompute every endpoint of the
// Service whatever changed). A change after a quiet spell is synced at
// once; changes that follow a sync closely wait until Period has passed
// since it started, so a burst of a thousand Pod updates costs a few syncs
// instead of hundreds. It only computes delays: the caller's work queue
// does the waiting and merges the keys queued meanwhile.
package pace

import (
	"sync"
	"time"
)

// minSweep is the number of keys above which Started drops keys whose
// last sync is older than Period, so that Services synced once and never
// again do not stay in memory.
const minSweep = 64

// Pacer remembers when each key's last sync started. The zero value never
// delays anything; set Period to pace.
type Pacer[K comparable] struct {
	// Period is the least time between the starts of two syncs of one key
	// that an event asks for; 0 disables pacing.
	Period time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	last    map[K]time.Time
	sweepAt int
}

// Delay returns how long a sync caused by an event about key should wait:
// nothing when key has not been synced within Period, otherwise until
// Period after its last sync started. A sync running now counts: what the
// event changed may have been read before it.
func (p *Pacer[K]) Delay(key K) time.Duration {
	if p.Period <= 0 {
		return 0
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[key]
	if !ok {
		return 0
	}
	if wait := last.Add(p.Period).Sub(now); wait > 0 {
		return wait
	}
	delete(p.last, key)
	return 0
}

// Started records that a sync of key starts now.
func (p *Pacer[K]) Started(key K) {
	if p.Period <= 0 {
		return
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[K]time.Time{}
	}
	p.last[key] = now
	if len(p.last) > max(p.sweepAt, minSweep) {
		for k, t := range p.last {
			if now.Sub(t) >= p.Period {
				delete(p.last, k)
			}
		}
		p.sweepAt = 2 * len(p.last)
	}
}

// Forget drops what the Pacer knows of key, for a key that is gone.
func (p *Pacer[K]) Forget(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}

// Len is the number of keys the Pacer remembers.
func (p *Pacer[K]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.last)
}

func (p *Pacer[K]) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}
