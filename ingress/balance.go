package ingress

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"portal.dev/portal/ingress/route"
)

// Ejection: an endpoint whose dial failed takes no new requests for
// minEjection, twice as long after each further failure within the
// ejection plus that long again, up to maxEjection.
const (
	minEjection = 5 * time.Second
	maxEjection = 80 * time.Second
)

// balancer picks endpoints by power of two random choices, the one with
// fewer requests in flight winning, as Envoy's least-request balancer
// does: it spreads load like least-connections without a lock or a scan.
// Its state is per endpoint address, shared by every Backend that lists
// the address, so a new Table keeps the counts and ejections.
type balancer struct {
	// now is a test's clock, nil for the system's.
	now       func() time.Time
	endpoints sync.Map // address -> *endpoint
}

// time is the balancer's time.
func (b *balancer) time() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// after is the balancer's time, read after t, which came from it:
// clockAfter(t) on the system's clock.
func (b *balancer) after(t time.Time) time.Time {
	if b.now != nil {
		return b.now()
	}
	return clockAfter(t)
}

// endpoint is the balancer's state of one address.
type endpoint struct {
	addr     string
	inFlight atomic.Int64

	mu           sync.Mutex
	ejectedUntil time.Time
	ejection     time.Duration // the last one, doubled on a repeat
	// idle are the direct path's pooled connections to addr, the most
	// recently used last.
	idle []*backendConn
	// forgotten is set once sweep dropped the state: connections given
	// back to it then are closed.
	forgotten bool
}

func (b *balancer) state(addr string) *endpoint {
	if e, ok := b.endpoints.Load(addr); ok {
		return e.(*endpoint)
	}
	e, _ := b.endpoints.LoadOrStore(addr, &endpoint{addr: addr})
	return e.(*endpoint)
}

// usable returns the addresses a backend's requests go to: the ready
// endpoints, or when none is ready the serving but terminating ones.
func usable(e *route.Endpoints) []string {
	if len(e.Ready) > 0 {
		return e.Ready
	}
	return e.Fallback
}

// pick chooses one of addrs, leaving out those in tried and those
// ejected, unless that leaves nothing: the last usable endpoints are
// never ejected, as a refused connection is then no worse than a 503.
// It returns nil when every address was tried. now is the balancer's
// time.
func (b *balancer) pick(addrs []string, tried []*endpoint, now time.Time) *endpoint {
	var candidates [2]*endpoint
	var fallback [2]*endpoint
	n, nf := 0, 0
	// Start at a random place and take the first two fit addresses: two
	// random choices without building a filtered list.
	start := 0
	if len(addrs) > 1 {
		start = rand.IntN(len(addrs))
	}
	for i := range addrs {
		e := b.state(addrs[(start+i)%len(addrs)])
		if triedAlready(tried, e) {
			continue
		}
		if e.ejected(now) {
			if nf < 2 {
				fallback[nf] = e
				nf++
			}
			continue
		}
		candidates[n] = e
		if n++; n == 2 {
			break
		}
	}
	if n == 0 {
		candidates, n = fallback, nf
	}
	switch {
	case n == 0:
		return nil
	case n == 1 || candidates[0].inFlight.Load() <= candidates[1].inFlight.Load():
		return candidates[0]
	default:
		return candidates[1]
	}
}

func triedAlready(tried []*endpoint, e *endpoint) bool {
	for _, t := range tried {
		if t == e {
			return true
		}
	}
	return false
}

func (e *endpoint) ejected(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return now.Before(e.ejectedUntil)
}

// remembered says whether e's last ejection still counts: it is in
// force, or recent enough for a new failure to double it.
func (e *endpoint) remembered(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ejection > 0 && !now.After(e.ejectedUntil.Add(e.ejection))
}

// eject keeps new requests away from e after a failed dial.
func (e *endpoint) eject(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.ejectedUntil) {
		return // other requests failed at the same time: one failure
	}
	switch {
	case e.ejection == 0 || now.After(e.ejectedUntil.Add(e.ejection)):
		e.ejection = minEjection
	case e.ejection < maxEjection:
		e.ejection *= 2
	}
	e.ejectedUntil = now.Add(e.ejection)
}

// sweep forgets the endpoints with nothing in flight and no ejection to
// remember, so that addresses of pods long gone do not pile up; an
// address still in use gets fresh state at its next pick. The pooled
// connections of a forgotten endpoint are closed.
func (b *balancer) sweep(now time.Time) {
	b.endpoints.Range(func(k, v any) bool {
		if e := v.(*endpoint); e.inFlight.Load() == 0 && !e.remembered(now) {
			b.endpoints.Delete(k)
			e.closeIdle(now, true)
		}
		return true
	})
}

// closeIdle closes the pooled connections that went idle before oldest.
func (b *balancer) closeIdle(oldest time.Time) {
	b.endpoints.Range(func(_, v any) bool {
		v.(*endpoint).closeIdle(oldest, false)
		return true
	})
}
