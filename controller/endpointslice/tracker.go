package endpointslice

import (
	"strconv"
	"sync"
	"time"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// staleGrace bounds how long the tracker trusts a write the cache has not
// shown yet. Past it the cache is believed: a watch that skipped our write
// (a relist after compaction, a slice deleted by someone else before we saw
// it) must not keep the Service stale forever.
const staleGrace = time.Minute

// sliceTracker remembers the slices this controller wrote, by Service, so
// that the controller can tell its own writes from other changes and a
// cache that lags behind its writes from one that doesn't. It does what
// upstream's EndpointSliceTracker does, with resourceVersions instead of
// generations: Portal's API server does not bump metadata.generation on
// EndpointSlices. resourceVersions are compared as numbers, which holds
// for the etcd-backed storage; a version that is not a number is trusted
// as current. The zero value is ready to use.
type sliceTracker struct {
	mu    sync.Mutex
	now   func() time.Time
	bySvc map[string]map[types.UID]writeRecord
	// held keeps, by Service being synced, the slice events that arrived
	// during its sync. A write is recorded only once the API server has
	// answered, and the watch may deliver its event before that; judged
	// at once, our own write would look like news and cost another sync.
	held map[string][]heldEvent
}

type heldEvent struct {
	slice   *discovery.EndpointSlice
	deleted bool
}

// writeRecord is our last write of one slice.
type writeRecord struct {
	rv      string
	deleted bool
	at      time.Time
}

func (t *sliceTracker) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// wrote records a create or update the API server answered with s.
func (t *sliceTracker) wrote(svcKey string, s *discovery.EndpointSlice) {
	t.set(svcKey, s.UID, writeRecord{rv: s.ResourceVersion, at: t.clock()})
}

// deleted records that we deleted s.
func (t *sliceTracker) deleted(svcKey string, s *discovery.EndpointSlice) {
	t.set(svcKey, s.UID, writeRecord{deleted: true, at: t.clock()})
}

func (t *sliceTracker) set(svcKey string, uid types.UID, r writeRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bySvc == nil {
		t.bySvc = map[string]map[types.UID]writeRecord{}
	}
	if t.bySvc[svcKey] == nil {
		t.bySvc[svcKey] = map[types.UID]writeRecord{}
	}
	t.bySvc[svcKey][uid] = r
}

// begin starts holding svcKey's slice events until end; a Service is
// synced by one worker at a time.
func (t *sliceTracker) begin(svcKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held = map[string][]heldEvent{}
	}
	t.held[svcKey] = []heldEvent{}
}

// hold keeps an event about s, deleted or not, when svcKey is being
// synced, and reports whether it did; end judges it then.
func (t *sliceTracker) hold(svcKey string, s *discovery.EndpointSlice, deleted bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	evs, ok := t.held[svcKey]
	if ok {
		t.held[svcKey] = append(evs, heldEvent{s, deleted})
	}
	return ok
}

// end stops holding svcKey's events and reports whether any of those held
// is news now that the sync's writes are recorded.
func (t *sliceTracker) end(svcKey string) bool {
	t.mu.Lock()
	evs := t.held[svcKey]
	delete(t.held, svcKey)
	t.mu.Unlock()
	news := false
	for _, ev := range evs {
		if ev.deleted {
			news = !t.observeDeletion(svcKey, ev.slice) || news
		} else {
			news = t.shouldSync(svcKey, ev.slice) || news
		}
	}
	return news
}

// shouldSync reports whether an event about s is news: a slice we never
// wrote, or one changed since our last write of it.
func (t *sliceTracker) shouldSync(svcKey string, s *discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.bySvc[svcKey][s.UID]
	return !ok || r.deleted || changedSince(s.ResourceVersion, r.rv)
}

// observeDeletion forgets s and reports whether we deleted it. Any other
// deletion of a managed slice, also of one we never wrote, needs a sync.
func (t *sliceTracker) observeDeletion(svcKey string, s *discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	recs := t.bySvc[svcKey]
	r, ok := recs[s.UID]
	delete(recs, s.UID)
	if len(recs) == 0 {
		delete(t.bySvc, svcKey)
	}
	return ok && r.deleted
}

// stale reports whether cached, the slices the cache holds for svcKey,
// misses any of our recent writes: an older version of a slice we wrote, a
// slice we deleted, or no sign of a slice we created.
func (t *sliceTracker) stale(svcKey string, cached []*discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	recs := t.bySvc[svcKey]
	t.expireLocked(recs)
	seen := make(map[types.UID]bool, len(cached))
	for _, s := range cached {
		seen[s.UID] = true
		if r, ok := recs[s.UID]; ok && (r.deleted || behind(s.ResourceVersion, r.rv)) {
			return true
		}
	}
	for uid, r := range recs {
		if !r.deleted && !seen[uid] {
			return true
		}
	}
	return false
}

// expireLocked drops records older than staleGrace.
func (t *sliceTracker) expireLocked(recs map[types.UID]writeRecord) {
	now := t.clock()
	for uid, r := range recs {
		if now.Sub(r.at) > staleGrace {
			delete(recs, uid)
		}
	}
}

// changedSince reports whether the cached version cur differs from ours
// by a later write. Versions that are not numbers count as changed when
// they differ: an extra sync is cheap, a missed one is not.
func changedSince(cur, ours string) bool {
	c, o, ok := parseRVs(cur, ours)
	if !ok {
		return cur != ours
	}
	return c > o
}

// behind reports whether the cached version cur predates our write ours.
// Versions that are not numbers never count as behind, so the cache is
// believed rather than waited for.
func behind(cur, ours string) bool {
	c, o, ok := parseRVs(cur, ours)
	return ok && c < o
}

func parseRVs(a, b string) (uint64, uint64, bool) {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	return na, nb, errA == nil && errB == nil
}
