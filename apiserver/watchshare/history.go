package watchshare

import "k8s.io/apimachinery/pkg/watch"

// historySize is how many of its latest events a group keeps for watches
// that join it from a version it has already passed. Clients that list and
// then watch together (informers starting at once, the watchers of a
// benchmark) open their watches from the same list's version within a
// second or two, while the resource may change: a few hundred events cover
// that gap on a busy resource. A kept event with cached serializations
// holds them, so a small resource's history costs well under a megabyte.
const historySize = 256

// history is the latest events a group passed on: every event after from,
// oldest first. Its zero value keeps nothing.
type history struct {
	// from is the version after which the history holds every event the
	// group passed on.
	from uint64
	// ring holds the events; once it is full, head is the oldest.
	ring []recorded
	head int
	size int
}

// recorded is an event the group passed on and its resource version.
type recorded struct {
	ev watch.Event
	rv uint64
}

func newHistory(from uint64, size int) history {
	return history{from: from, size: size}
}

// add records ev, of version rv; when full, it forgets the oldest event.
// ev must be the history's own: it is handed out again to joining watches.
func (h *history) add(ev watch.Event, rv uint64) {
	if len(h.ring) < h.size {
		h.ring = append(h.ring, recorded{ev, rv})
		return
	}
	if h.size == 0 {
		h.from = rv
		return
	}
	h.from = h.ring[h.head].rv
	h.ring[h.head] = recorded{ev, rv}
	h.head = (h.head + 1) % h.size
}

// covers says whether the history holds every event after since.
func (h *history) covers(since uint64) bool { return since >= h.from }

// after calls f with each event after since, oldest first.
func (h *history) after(since uint64, f func(watch.Event)) {
	for i := range h.ring {
		r := h.ring[(h.head+i)%len(h.ring)]
		if r.rv > since {
			f(r.ev)
		}
	}
}
