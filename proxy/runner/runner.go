// Package runner runs a sync function the way a proxy needs: requests
// coalesce, runs are rate-limited to one per MinInterval with a burst of
// Burst, a periodic run happens every Period whatever else happens, and a
// failed run is retried with exponential backoff. It owns one goroutine,
// which stops when Run's context ends; it knows nothing about what the
// function syncs.
package runner

import (
	"context"
	"time"
)

// Func is the work the runner runs. periodic is true when the run is
// (also) the periodic one, which callers use for a full resync.
type Func func(ctx context.Context, periodic bool) error

// Burst is how many runs may start back to back after a quiet period
// (kube-proxy's burstSyncs): with one, a change that follows another by
// less than MinInterval waits for it even when nothing else changed for
// minutes; with two, it applies at once and only a third one waits.
const Burst = 2

// Runner coalesces requests to run a Func. Create it with New.
type Runner struct {
	fn          Func
	minInterval time.Duration
	period      time.Duration
	maxBackoff  time.Duration
	trigger     chan struct{}
}

// New returns a runner for fn. Runs are limited by a token bucket, as
// kube-proxy's BoundedFrequencyRunner: Burst tokens, one more every
// minInterval, one taken by each run (zero minInterval allows
// back-to-back runs); period is how often a periodic run happens (it must
// be positive; periodic runs do not wait for a token). Retries after a
// failure start at minInterval (at least 100ms) and double up to period.
func New(fn Func, minInterval, period time.Duration) *Runner {
	if period <= 0 {
		panic("runner: period must be positive")
	}
	return &Runner{
		fn:          fn,
		minInterval: minInterval,
		period:      period,
		maxBackoff:  period,
		trigger:     make(chan struct{}, 1),
	}
}

// Trigger asks for a run. It never blocks; requests made before the run
// starts are served by that one run.
func (r *Runner) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Run runs the function, as requested and periodically, until ctx ends.
// The first periodic run is one period after Run starts; call Trigger for
// an earlier first run.
func (r *Runner) Run(ctx context.Context) {
	var (
		b            = bucket{credit: Burst * r.minInterval, every: r.minInterval}
		wanted       bool // a Trigger arrived that no run has served yet
		failures     int
		retryAt      time.Time
		periodicNext = time.Now().Add(r.period)
	)
	timer := time.NewTimer(r.period)
	defer timer.Stop()
	for {
		now := time.Now()
		next := periodicNext
		if wanted {
			if at := b.next(now); at.Before(next) {
				next = at
			}
		}
		if failures > 0 && retryAt.Before(next) {
			next = retryAt
		}
		if wait := next.Sub(now); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-r.trigger:
				wanted = true
				continue
			case <-timer.C:
				continue
			}
		}
		// Drain a request that arrived while we were deciding: this run
		// serves it.
		select {
		case <-r.trigger:
		default:
		}
		periodic := !now.Before(periodicNext)
		if periodic {
			periodicNext = now.Add(r.period)
		}
		wanted = false
		b.take(now)
		if err := r.fn(ctx, periodic); err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			retryAt = time.Now().Add(r.backoff(failures))
		} else {
			failures = 0
		}
	}
}

// bucket is the runs' token bucket: up to Burst tokens, one more every
// every (none needed when every is zero). It counts the tokens in time,
// credit = tokens * every, so that the arithmetic is exact.
type bucket struct {
	credit time.Duration
	every  time.Duration
	at     time.Time // when credit was counted; zero before the first run
}

func (b *bucket) refill(now time.Time) {
	if !b.at.IsZero() {
		b.credit = min(Burst*b.every, b.credit+now.Sub(b.at))
	}
	b.at = now
}

// next returns when a run may start: now when a token is there.
func (b *bucket) next(now time.Time) time.Time {
	b.refill(now)
	if b.credit >= b.every {
		return now
	}
	return now.Add(b.every - b.credit)
}

// take takes a token for a run starting now (a periodic run may find
// none; it takes what there is).
func (b *bucket) take(now time.Time) {
	b.refill(now)
	b.credit = max(0, b.credit-b.every)
}

func (r *Runner) backoff(failures int) time.Duration {
	d := max(r.minInterval, 100*time.Millisecond)
	for i := 1; i < failures && d < r.maxBackoff; i++ {
		d *= 2
	}
	return min(d, r.maxBackoff)
}
