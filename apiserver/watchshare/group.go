package watchshare

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// group is one watch of the storage whose events go to every member.
type group struct {
	s   *sharedStorage
	key string // the groups map's key
	// open starts a watch of the storage after a resource version.
	open func(rv uint64) (watch.Interface, error)

	mu      sync.Mutex
	up      watch.Interface
	members map[*member]struct{}
	// last is the resource version of the newest event (or bookmark) the
	// group has passed on, at first the one it started from: a watch from
	// a version at or after it misses nothing by joining.
	last uint64
	// hist is the latest events the group passed on, which a watch from
	// an older version than last gets first when it joins.
	hist history
	// started: the current upstream watch has passed on an event or a
	// bookmark, so the storage accepted the version it was opened from.
	started bool
	// to is pass's list of the members an event goes to, kept between
	// events so that passing one allocates nothing.
	to []*member
	// done: the upstream watch ended or is being stopped; no one joins.
	done bool
}

// join adds a member watching from since, if the group's history still
// holds every event it passed on after since; nil otherwise. The member
// gets those events first. A watch from a newer version than the group's
// joins only once the storage accepted the group's start: until then the
// storage may still answer the group's older version with an error (410
// Gone) that the newer watch must not get.
func (g *group) join(since uint64, bookmarks bool, bookmarkAt time.Time) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done || !g.hist.covers(since) || since > g.last && !g.started {
		return nil
	}
	m := newMember(g, since, bookmarks, bookmarkAt, g.s.limit)
	g.hist.after(since, func(ev watch.Event) { m.push(ownCopy(ev)) })
	g.members[m] = struct{}{}
	go m.run()
	return m
}

// leave removes m; the last member to leave stops the upstream watch.
func (g *group) leave(m *member) {
	g.mu.Lock()
	delete(g.members, m)
	last := len(g.members) == 0 && !g.done
	if last {
		g.done = true
	}
	up := g.up
	g.mu.Unlock()
	if last {
		g.s.remove(g)
		up.Stop()
	}
}

// bookmark queues for m a bookmark of the newest version the group has
// passed on, if that is after m's start. Holding g.mu while queueing keeps
// it after every event up to that version and before any later one.
func (g *group) bookmark(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last <= m.since {
		return
	}
	obj := g.s.newFunc()
	if err := g.s.Versioner().UpdateObject(obj, g.last); err != nil {
		return
	}
	m.push(watch.Event{Type: watch.Bookmark, Object: obj})
}

// maxEmptyReopens is how many watches of the storage in a row may end
// without an event before the group gives up and ends its members.
const maxEmptyReopens = 3

// dispatch passes the upstream events on. When the storage ends the
// upstream watch (the cacher ends a watcher it finds unresponsive), the
// group watches again from the last version it passed on, as its members'
// clients would, so they see nothing of it. After an error event, or when
// watching again fails, the members end.
func (g *group) dispatch(versioner storage.Versioner) {
	defer g.s.remove(g)
	empty := 0
	for {
		g.mu.Lock()
		up := g.up
		g.mu.Unlock()
		passed, failed := g.pass(up, versioner)
		if passed > 0 {
			empty = 0
		} else {
			empty++
		}
		g.mu.Lock()
		if g.done || failed || empty > maxEmptyReopens {
			break
		}
		last := g.last
		g.mu.Unlock()
		w, err := g.open(last)
		g.mu.Lock()
		if err != nil || g.done {
			if w != nil {
				w.Stop()
			}
			break
		}
		g.up, g.started = w, false
		g.mu.Unlock()
	}
	// Still holding g.mu. Stop the upstream watch before the members end
	// (Stop is idempotent): an etcd watcher that sent an error keeps its
	// etcd watch open until it is stopped, and once done is set no
	// leaving member would stop it.
	g.done = true
	up := g.up
	g.mu.Unlock()
	up.Stop()
	g.mu.Lock()
	for m := range g.members {
		m.end()
	}
	g.mu.Unlock()
}

// pass passes up's events on until it ends and returns how many it passed
// and whether one was an error.
func (g *group) pass(up watch.Interface, versioner storage.Versioner) (int, bool) {
	n := 0
	for ev := range up.ResultChan() {
		var rv uint64
		if ev.Type != watch.Error {
			rv, _ = versioner.ObjectResourceVersion(ev.Object)
		}
		g.mu.Lock()
		to := g.to[:0]
		for m := range g.members {
			if wants(m, ev, rv) {
				to = append(to, m)
			}
		}
		now := time.Now()
		g.hist.expire(now.Add(-historyAge))
		if ev.Type != watch.Error && ev.Type != watch.Bookmark {
			// The history's own copy: the members' handlers may
			// write to theirs.
			g.hist.add(ownCopy(ev), rv, now)
		}
		for i, m := range to {
			// The last member gets ev itself, once every copy of it
			// is made: a member's handler may write to it at once.
			mev := ev
			if i < len(to)-1 {
				mev = ownCopy(ev)
			}
			if !m.push(mev) {
				// Fallen too far behind: the member ends as the
				// cacher would have ended its watch.
				delete(g.members, m)
			}
		}
		clear(to)
		g.to = to
		g.last = max(g.last, rv)
		if ev.Type == watch.Error {
			g.mu.Unlock()
			return n, true
		}
		g.started = true
		g.mu.Unlock()
		n++
	}
	return n, false
}

// ownCopy is ev with an object of its own, as the cacher gives each of
// its watchers: the request handler's encoder sets the type meta of a plain
// object while it converts it, so members must not share one. An object
// with cached serializations (runtime.CacheableObject) is encoded without
// being written to and is shared; the others (events the cacher replays
// from its window, bookmarks, all events of a resource without a watch
// cache) are few or cheap next to their encoding.
func ownCopy(ev watch.Event) watch.Event {
	if ev.Object == nil {
		return ev
	}
	if _, ok := ev.Object.(runtime.CacheableObject); ok {
		return ev
	}
	return watch.Event{Type: ev.Type, Object: ev.Object.DeepCopyObject()}
}

// wants says whether member m gets ev, of resource version rv.
func wants(m *member, ev watch.Event, rv uint64) bool {
	switch ev.Type {
	case watch.Error:
		return true
	case watch.Bookmark:
		return m.bookmarks && rv > m.since
	default:
		return rv > m.since
	}
}
