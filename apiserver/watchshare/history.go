package watchshare

import (
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// A group keeps its latest events, up to historySize of them and none
// older than historyAge, for watches that join it from a version it has
// already passed. Clients that list and then watch together (informers
// starting at once, the watchers of a benchmark) open their watches from
// the same list's version within a second or two, while the resource may
// change: a few hundred events of the last seconds cover that gap on a
// busy resource. A kept event holds its object and, when it has them, its
// cached serializations, so the age bound keeps an idle group from holding
// its last events for good; the group's periodic bookmarks let it forget
// them while no event comes.
const (
	historySize = 256
	historyAge  = 10 * time.Second
)

// history is the latest events a group passed on: every event after from,
// oldest first. Its zero value keeps nothing.
type history struct {
	// from is the version after which the history holds every event the
	// group passed on.
	from uint64
	size int
	// ring holds the n events kept, from head on; allocated while it
	// holds any.
	ring    []recorded
	head, n int
}

// recorded is an event the group passed on, its resource version and
// when it was passed on.
type recorded struct {
	ev watch.Event
	rv uint64
	at time.Time
}

func newHistory(from uint64, size int) history {
	return history{from: from, size: size}
}

// add records ev, of version rv, passed on at at; when full, it forgets
// the oldest event. ev must be the history's own: it is handed out again
// to joining watches.
func (h *history) add(ev watch.Event, rv uint64, at time.Time) {
	if h.size == 0 {
		h.from = rv
		return
	}
	if h.ring == nil {
		h.ring = make([]recorded, h.size)
	}
	if h.n == h.size {
		h.dropOldest()
	}
	h.ring[(h.head+h.n)%h.size] = recorded{ev, rv, at}
	h.n++
}

// expire forgets the events passed on before cutoff.
func (h *history) expire(cutoff time.Time) {
	for h.n > 0 && h.ring[h.head].at.Before(cutoff) {
		h.dropOldest()
	}
	if h.n == 0 {
		h.ring, h.head = nil, 0
	}
}

func (h *history) dropOldest() {
	h.from = h.ring[h.head].rv
	h.ring[h.head] = recorded{}
	h.head = (h.head + 1) % h.size
	h.n--
}

// covers says whether the history holds every event after since.
func (h *history) covers(since uint64) bool { return since >= h.from }

// after calls f with each event after since, oldest first.
func (h *history) after(since uint64, f func(watch.Event)) {
	for i := range h.n {
		r := h.ring[(h.head+i)%h.size]
		if r.rv > since {
			f(r.ev)
		}
	}
}
