package userspace

import (
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"portal.dev/portal/proxy/snapshot"
)

// backend is one endpoint of one Service port. It lives as long as the
// endpoint serves the port, plus its drain.
type backend struct {
	addr    netip.AddrPort
	name    string
	active  atomic.Int64
	series  seriesKey
	all     *metrics
	m       atomic.Pointer[backendMetrics]
	mu      sync.Mutex
	conns   map[io.Closer]struct{}
	removed bool
}

// stats returns the backend's series, made on first use: a Service with
// many endpoints that are never used costs no series. A backend that is
// gone and drained gets the detached ones.
func (b *backend) stats() *backendMetrics {
	if m := b.m.Load(); m != nil {
		return m
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.m.Load(); m != nil {
		return m
	}
	m := b.all.forBackend(b.series)
	b.m.Store(m)
	return m
}

// track registers c to be closed when the backend is gone; false when it
// already is.
func (b *backend) track(c io.Closer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.removed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

// untrack forgets c, which has ended and counted all it will count.
func (b *backend) untrack(c io.Closer) {
	b.mu.Lock()
	delete(b.conns, c)
	b.forgetLocked()
	b.mu.Unlock()
}

// remove marks b gone: it takes no new connections, and its series leave
// /metrics when its last connection has ended. It returns the tracked
// UDP flows, for the caller to close.
func (b *backend) remove() []io.Closer {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removed = true
	var flows []io.Closer
	for c := range b.conns {
		if d, ok := c.(drainer); !ok || !d.drains() {
			flows = append(flows, c)
		}
	}
	b.forgetLocked()
	return flows
}

// forgetLocked deletes the series of a backend that is gone and drained:
// an endpoint that left must not stay in /metrics for the life of the
// proxy.
func (b *backend) forgetLocked() {
	if !b.removed || len(b.conns) > 0 {
		return
	}
	if m := b.m.Swap(detachedBackend); m != nil && m != detachedBackend {
		b.all.release(b.series)
	}
}

// closeAll closes every tracked connection or flow; each is untracked as
// it ends.
func (b *backend) closeAll() {
	b.mu.Lock()
	conns := make([]io.Closer, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// drainer is a tracked thing that finishes on its own and is only closed
// when the drain timeout ends: TCP connections. UDP flows have no end to
// wait for and are closed at once, so the next datagram picks a live
// endpoint (kubernetes issues 19029, 59368).
type drainer interface{ drains() bool }

// servicePort is the state of one Service port that outlives syncs: its
// backends (with their open connections) and its affinity table.
type servicePort struct {
	key     portKey
	metrics *metrics

	mu       sync.Mutex
	denied   prometheus.Counter // made on the first refusal
	gone     bool
	all      map[netip.AddrPort]*backend
	affinity map[netip.Addr]affinityEntry
	sweepAt  int                  // affinity size that triggers the next sweep
	sched    map[string]Scheduler // by scheduler name + backend list
}

// minAffinitySweep is the smallest affinity table that is swept.
const minAffinitySweep = 64

type affinityEntry struct {
	backend *backend
	expires time.Time
}

// backends returns the backend objects of eps, creating the new ones.
func (sp *servicePort) backends(eps []*snapshot.Endpoint) []*backend {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := make([]*backend, 0, len(eps))
	for _, e := range eps {
		ap := e.AddrPort()
		b := sp.all[ap]
		if b == nil {
			b = &backend{addr: ap, name: ap.String(), conns: map[io.Closer]struct{}{}, all: sp.metrics,
				series: seriesKey{sp.key.svc.String(), sp.key.port, ap.String()}}
			sp.all[ap] = b
		}
		out = append(out, b)
	}
	return out
}

// scheduler returns a scheduler over bs, reusing the one built for the
// same list (maglev's table is worth keeping).
func (sp *servicePort) scheduler(name string, bs []*backend) Scheduler {
	key := name
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.name
		key += "," + b.name
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if s, ok := sp.sched[key]; ok {
		return s
	}
	s := NewScheduler(name, names, func(i int) int64 { return bs[i].active.Load() })
	if sp.sched == nil {
		sp.sched = map[string]Scheduler{}
	}
	sp.sched[key] = s
	return s
}

// retain keeps the backends in keep and removes the others: their UDP
// flows are closed now, their TCP connections after drain.
func (sp *servicePort) retain(keep []*backend, drain time.Duration) {
	set := make(map[*backend]bool, len(keep))
	for _, b := range keep {
		set[b] = true
	}
	sp.mu.Lock()
	var gone []*backend
	for ap, b := range sp.all {
		if !set[b] {
			gone = append(gone, b)
			delete(sp.all, ap)
		}
	}
	for c, e := range sp.affinity {
		if !set[e.backend] {
			delete(sp.affinity, c)
		}
	}
	// Old scheduler lists go with a change of backends.
	if len(gone) > 0 {
		sp.sched = nil
	}
	sp.mu.Unlock()
	for _, b := range gone {
		for _, c := range b.remove() {
			c.Close()
		}
		if drain <= 0 {
			b.closeAll()
		} else {
			time.AfterFunc(drain, b.closeAll)
		}
	}
}

// series is the label set of the Service port's own series.
func (k portKey) series() seriesKey { return seriesKey{service: k.svc.String(), port: k.port} }

// deniedCounter returns the series of the connections refused by
// loadBalancerSourceRanges, made on the first refusal.
func (sp *servicePort) deniedCounter() prometheus.Counter {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.denied == nil {
		if sp.gone {
			return detachedDenied
		}
		sp.denied = sp.metrics.forPort(sp.key.series())
	}
	return sp.denied
}

// remove removes the Service port: its backends drain, and its own series
// leave /metrics now.
func (sp *servicePort) remove(drain time.Duration) {
	sp.retain(nil, drain)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.gone {
		return
	}
	sp.gone = true
	if sp.denied != nil {
		sp.metrics.release(sp.key.series())
		sp.denied = detachedDenied
	}
}

// pick chooses the backend for a connection from client: the affinity
// entry when there is a live one, else the scheduler's, skipping tried.
func (r *route) pick(c Conn, tried func(int) bool, now time.Time) int {
	if r.affinity > 0 && tried == nil {
		r.sp.mu.Lock()
		e, ok := r.sp.affinity[c.Client.Addr()]
		r.sp.mu.Unlock()
		if ok && now.Before(e.expires) {
			for i, b := range r.backends {
				if b == e.backend {
					return i
				}
			}
		}
	}
	return r.sched.Pick(c, tried)
}

// remember records that client now uses b (ClientIP affinity).
func (r *route) remember(client netip.Addr, b *backend, now time.Time) {
	if r.affinity <= 0 {
		return
	}
	r.sp.mu.Lock()
	if len(r.sp.affinity) >= r.sp.sweepAt {
		r.sp.sweepAffinityLocked(now)
	}
	r.sp.affinity[client] = affinityEntry{backend: b, expires: now.Add(r.affinity)}
	r.sp.mu.Unlock()
}

// sweepAffinityLocked drops the expired affinity entries, so that a
// stream of distinct clients does not grow the table without bound. It
// runs when the table has doubled since the last sweep: each connection
// pays a constant share of the sweeps, and the table holds at most twice
// the clients of one timeout (plus minAffinitySweep). The live entries
// move to a new map, since a map does not shrink when entries are deleted.
func (sp *servicePort) sweepAffinityLocked(now time.Time) {
	live := map[netip.Addr]affinityEntry{}
	for c, e := range sp.affinity {
		if now.Before(e.expires) {
			live[c] = e
		}
	}
	sp.affinity = live
	sp.sweepAt = max(2*len(live), minAffinitySweep)
}

// allowed reports whether client may use the route.
func (r *route) allowed(client netip.Addr) bool {
	if r.ranges == nil {
		return true
	}
	for _, p := range r.ranges {
		if p.Contains(client) {
			return true
		}
	}
	return false
}
