package watchshare

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// outSize is the buffer of the channel the request handler reads. The
// handler flushes the connection only when that channel is empty, so a
// buffer lets it write a burst of events in one flush.
const outSize = 100

// member is one client's watch in a group: the group pushes events into its
// queue without ever waiting, and the member's goroutine hands them to the
// request handler at the handler's pace.
type member struct {
	g *group
	// since is the resource version the client watches from: it gets only
	// events after it.
	since     uint64
	bookmarks bool
	// bookmarkAt is when to send a bookmark of the member's own, just
	// before its request's deadline; zero for none.
	bookmarkAt time.Time
	limit      int

	out      chan watch.Event
	notify   chan struct{} // one pending wake-up
	stop     chan struct{}
	stopOnce sync.Once

	mu      sync.Mutex
	pending []watch.Event
	// ended: no more events will come; deliver what is queued, then close.
	ended bool
	// overflowed: the client fell limit events behind; close at once.
	overflowed bool
}

func newMember(g *group, since uint64, bookmarks bool, bookmarkAt time.Time, limit int) *member {
	return &member{g: g, since: since, bookmarks: bookmarks, bookmarkAt: bookmarkAt, limit: limit,
		out: make(chan watch.Event, outSize), notify: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (m *member) ResultChan() <-chan watch.Event { return m.out }

func (m *member) Stop() { m.stopOnce.Do(func() { close(m.stop) }) }

// push queues ev and reports false when the queue overflowed, after which
// the member takes no more events.
func (m *member) push(ev watch.Event) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.overflowed || m.ended {
		return false
	}
	if len(m.pending) >= m.limit {
		m.overflowed, m.pending = true, nil
		m.wake()
		return false
	}
	m.pending = append(m.pending, ev)
	m.wake()
	return true
}

// end says no more events will come.
func (m *member) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = true
	m.wake()
}

func (m *member) wake() {
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// next returns the next event to deliver; false when the member is done.
// A value on bookmark queues the member's deadline bookmark.
func (m *member) next(bookmark <-chan time.Time) (watch.Event, bool) {
	for {
		m.mu.Lock()
		switch {
		case m.overflowed:
			m.mu.Unlock()
			return watch.Event{}, false
		case len(m.pending) > 0:
			ev := m.pending[0]
			m.pending[0] = watch.Event{}
			m.pending = m.pending[1:]
			if len(m.pending) == 0 {
				// Let go of the array a burst grew, so an idle
				// watch holds none.
				m.pending = nil
			}
			m.mu.Unlock()
			return ev, true
		case m.ended:
			m.mu.Unlock()
			return watch.Event{}, false
		}
		m.mu.Unlock()
		select {
		case <-m.notify:
		case <-bookmark:
			m.g.bookmark(m)
		case <-m.stop:
			return watch.Event{}, false
		}
	}
}

// run delivers the queued events until the member is stopped, ended and
// drained, or overflowed; then it leaves the group and closes the result
// channel.
func (m *member) run() {
	defer close(m.out)
	defer m.g.leave(m)
	var bookmark <-chan time.Time
	if !m.bookmarkAt.IsZero() {
		t := time.NewTimer(time.Until(m.bookmarkAt))
		defer t.Stop()
		bookmark = t.C
	}
	for {
		ev, ok := m.next(bookmark)
		if !ok {
			return
		}
		select {
		case m.out <- ev:
		case <-m.stop:
			return
		}
	}
}
