package workload

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// ExpectationsTimeout is how long expectations hold before a controller
// syncs anyway, as upstream: a watch event that never comes (a create
// the API server dropped, an event lost) delays a controller, never
// blocks it.
const ExpectationsTimeout = 5 * time.Minute

// Expectations records, per controller key, the creations and deletions a
// controller has issued and its informer has not yet shown. A controller
// that acts only when its expectations are Satisfied never counts the same
// missing Pod twice because its cache lags. The zero value is ready to use
// with the real clock.
type Expectations struct {
	// Clock tells when expectations were set; nil is the real clock.
	Clock clock.PassiveClock

	mu sync.Mutex
	m  map[string]*expectation
}

type expectation struct {
	adds int
	dels sets.Set[types.UID]
	set  time.Time
}

func (e *Expectations) now() time.Time {
	if e.Clock == nil {
		return time.Now()
	}
	return e.Clock.Now()
}

func (e *Expectations) getLocked(key string) *expectation {
	if e.m == nil {
		e.m = map[string]*expectation{}
	}
	x := e.m[key]
	if x == nil {
		x = &expectation{dels: sets.New[types.UID]()}
		e.m[key] = x
	}
	return x
}

// ExpectCreations records that the controller for key is about to create
// n objects, replacing what was expected of key before.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.getLocked(key)
	x.adds = n
	x.dels = sets.New[types.UID]()
	x.set = e.now()
}

// ExpectDeletions records that the controller for key is about to delete
// the objects with these UIDs, replacing what was expected of key before.
func (e *Expectations) ExpectDeletions(key string, uids []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.getLocked(key)
	x.adds = 0
	x.dels = sets.New(uids...)
	x.set = e.now()
}

// Expect records that the controller for key is about to create adds
// objects and delete the objects with these UIDs, replacing what was
// expected of key before. A controller that both creates and deletes in one
// sync sets both at once: ExpectCreations then ExpectDeletions would leave
// only the deletions expected.
func (e *Expectations) Expect(key string, adds int, dels []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.getLocked(key)
	x.adds = adds
	x.dels = sets.New(dels...)
	x.set = e.now()
}

// CreationObserved lowers the creations expected of key by one: the
// informer showed one, or a create failed and will never show.
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil && x.adds > 0 {
		x.adds--
	}
}

// DeletionObserved marks the deletion of uid as seen for key: the
// informer showed it going (or being marked for deletion), or the delete
// failed. Seeing the same uid twice counts once.
func (e *Expectations) DeletionObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil {
		x.dels.Delete(uid)
	}
}

// Satisfied reports whether the controller for key may act on its cache:
// nothing is expected of it, everything expected has been seen, or the
// expectations are older than ExpectationsTimeout.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	if x == nil {
		return true
	}
	if x.adds <= 0 && x.dels.Len() == 0 {
		return true
	}
	return e.now().Sub(x.set) > ExpectationsTimeout
}

// Pending returns the creations and deletions still expected of key.
func (e *Expectations) Pending(key string) (adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil {
		return max(x.adds, 0), x.dels.Len()
	}
	return 0, 0
}

// Delete forgets key, as when its controller object is deleted.
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
