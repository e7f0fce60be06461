package daemonset

import (
	"sync"
	"time"
)

// expectationsTTL is how long a sync waits for the watch to report its own
// creates and deletes before acting again anyway, as upstream's.
const expectationsTTL = 5 * time.Minute

// expectations counts, per DaemonSet, the Pod creates and deletes a sync
// made that the Pod informer has not reported yet. Until they arrive, or
// the TTL passes, the DaemonSet is not managed again, so a slow watch never
// makes it create a Node's Pod twice. The zero value is ready to use.
type expectations struct {
	mu      sync.Mutex
	pending map[string]*expected
}

type expected struct {
	add, del int
	at       time.Time
}

// expect records that a sync of key is about to make add creates and del
// deletes.
func (e *expectations) expect(key string, add, del int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending == nil {
		e.pending = map[string]*expected{}
	}
	e.pending[key] = &expected{add: add, del: del, at: time.Now()}
}

// observed lowers key's expected creates (add) or deletes by one: the
// informer reported one, or a write failed and will never be reported.
func (e *expectations) observed(key string, add bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.pending[key]; x != nil {
		if add {
			x.add--
		} else {
			x.del--
		}
	}
}

// satisfied reports whether key may be managed: nothing is pending, or it
// has waited past the TTL.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.pending[key]
	return x == nil || (x.add <= 0 && x.del <= 0) || time.Since(x.at) > expectationsTTL
}

// forget drops key's expectations: its DaemonSet is gone.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, key)
}
