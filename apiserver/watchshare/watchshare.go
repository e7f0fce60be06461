// Package watchshare serves identical watches of the watch cache from one
// watch of it, so that clients that keep reading are not ended as
// unresponsive when the server is short of CPU.
//
// k8s.io/apiserver's cacher hands each event to every watcher through a
// channel of 10 to 100 events (10 for a watch opened while the resource was
// quiet), drained by a goroutine per watcher. When a channel is full it
// waits at most what is left of a shared budget (50 ms a second, 100 ms at
// most) and then ends that watch. With a few hundred watches of a resource
// that changes a hundred times a second on two busy cores, the dispatcher
// fills the channels of a burst of events before their goroutines, queued
// behind hundreds of others, get to run: the budget is gone within a
// second and the cacher ends watch after watch of clients that read
// everything, which re-watch and are ended again. The sizes and the budget
// are constants of the cacher.
//
// Watches with the same key, selectors and options mostly start from the
// same recent resource version (informers of the same resource, kubectl
// get -w). A group holds one cacher watch for them and copies each event
// into every member's queue without waiting; each member's goroutine feeds
// its request handler at the client's pace. The cacher sees one watcher
// instead of hundreds, and the event objects, with their cached
// serializations, are shared, so a queued event costs a slot.
//
// A group keeps its latest events, and a watch from a version the group
// has already passed joins it with the events it missed, as long as the
// group still holds them; otherwise it starts a group of its own. Clients
// that watch from one list's version often open their watches after the
// resource changed once more: without the history each of them, after the
// first change, would start a group of its own, and the cacher would be
// back to hundreds of watchers of the same events. When the process as a
// whole gets no CPU for a while, the cacher may still end a group's watch:
// the group then watches again from the last version it passed on, which
// its members do not notice.
//
// A client that stops reading must not hold the server's memory: a member
// whose queue reaches the limit ends as the cacher would have ended it, and
// the client resumes from the last event it got. This package owns the
// watch between the storage and the request handler, nothing else.
package watchshare

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/client-go/tools/cache"
)

// DefaultLimit is how many events a member may have queued before it ends:
// about a minute of a resource changing 150 times a second. A queued event
// is shared with the other members, so it costs a few dozen bytes.
const DefaultLimit = 10000

// Getter returns the storage of the embedded getter's options with its
// watches shared (see the package comment).
type Getter struct {
	generic.RESTOptionsGetter
	// Limit is the queue limit of each watch; DefaultLimit when 0.
	Limit int
}

// GetRESTOptions is the embedded getter's options whose storage decorator
// shares the watches of the storage it builds.
func (g Getter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	limit := g.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	decorate := opts.Decorator
	if decorate == nil {
		decorate = generic.UndecoratedStorage
	}
	opts.Decorator = func(c *storagebackend.ConfigForResource, resourcePrefix string,
		keyFunc func(obj runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
		getAttrsFunc storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := decorate(c, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrsFunc, trigger, indexers)
		if err != nil {
			return s, destroy, err
		}
		return Share(s, newFunc, limit), destroy, nil
	}
	return opts, nil
}

// Share returns s with its watches shared, each member queueing at most
// limit events. newFunc returns an empty object of s's resource, for the
// bookmarks a member sends at its request's deadline; nil sends none.
func Share(s storage.Interface, newFunc func() runtime.Object, limit int) storage.Interface {
	return &sharedStorage{Interface: s, newFunc: newFunc, limit: limit, groups: map[string][]*group{}}
}

type sharedStorage struct {
	storage.Interface
	newFunc func() runtime.Object
	limit   int

	mu     sync.Mutex
	groups map[string][]*group
}

// Watch joins a group of watches with the same key and options that
// still holds every event it passed on after opts.ResourceVersion, or
// starts one.
// A watch with initial events (a version of 0 or none, or
// SendInitialEvents) is the storage's own.
func (s *sharedStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	since, gk, ok := shareable(key, opts)
	if !ok {
		return s.Interface.Watch(ctx, key, opts)
	}
	bookmarks := opts.Predicate.AllowWatchBookmarks
	at := s.bookmarkTime(ctx, bookmarks)
	// The storage signals priority and fairness that the watch is set up
	// only on the context of the request that opened the group's watch,
	// which does not carry it.
	defer utilflowcontrol.WatchInitialized(ctx)
	s.mu.Lock()
	for _, g := range s.groups[gk] {
		if m := g.join(since, bookmarks, at); m != nil {
			s.mu.Unlock()
			return m, nil
		}
	}
	s.mu.Unlock()

	upCtx, upOpts := upstreamContext(ctx), opts
	upOpts.Predicate.AllowWatchBookmarks = true
	open := func(rv uint64) (watch.Interface, error) {
		o := upOpts
		o.ResourceVersion = strconv.FormatUint(rv, 10)
		return s.Interface.Watch(upCtx, key, o)
	}
	w, err := open(since)
	if err != nil {
		return nil, err
	}
	g := &group{s: s, key: gk, open: open, up: w, members: map[*member]struct{}{}, last: since,
		hist: newHistory(since, historySize)}
	m := g.join(since, bookmarks, at)
	s.mu.Lock()
	s.groups[gk] = append(s.groups[gk], g)
	s.mu.Unlock()
	go g.dispatch(s.Versioner())
	return m, nil
}

// bookmarkTime is when a member whose client asked for bookmarks
// (bookmarks) sends one of its own: 2 s before its request's deadline, as
// the cacher does, so that a client whose watch times out resumes from a
// recent version rather than from the group's last periodic bookmark, up
// to a minute old, which on a busy resource may be out of the window by
// then. Zero for none.
func (s *sharedStorage) bookmarkTime(ctx context.Context, bookmarks bool) time.Time {
	deadline, ok := ctx.Deadline()
	if !bookmarks || !ok || s.newFunc == nil {
		return time.Time{}
	}
	at := deadline.Add(-2 * time.Second)
	if !at.After(time.Now()) {
		return time.Time{}
	}
	return at
}

// upstreamContext is the context of a group's watch, which outlives the
// request that opened it: none of the request's deadline, audit, tracing or
// user, only what scopes the cacher's watch (the namespace, and the name in
// the request info). The group's key makes these the same for every
// member.
func upstreamContext(ctx context.Context) context.Context {
	up := context.Background()
	if ns, ok := request.NamespaceFrom(ctx); ok {
		up = request.WithNamespace(up, ns)
	}
	if info, ok := request.RequestInfoFrom(ctx); ok && info != nil {
		own := *info
		own.Parts = nil
		up = request.WithRequestInfo(up, &own)
	}
	return up
}

// remove forgets g: no watch joins it any more.
func (s *sharedStorage) remove(g *group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs := s.groups[g.key]
	for i, x := range gs {
		if x == g {
			gs = append(gs[:i], gs[i+1:]...)
			break
		}
	}
	if len(gs) == 0 {
		delete(s.groups, g.key)
	} else {
		s.groups[g.key] = gs
	}
}

// shareable returns the version a watch starts after and the key of the
// groups it may join; false for a watch that must have its own.
func shareable(key string, opts storage.ListOptions) (uint64, string, bool) {
	p := opts.Predicate
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents || opts.ResourceVersionMatch != "" ||
		p.Limit != 0 || p.Continue != "" || p.ShardSelector != nil {
		return 0, "", false
	}
	rv, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
	if err != nil || rv == 0 {
		return 0, "", false
	}
	label, field := "", ""
	if p.Label != nil {
		label = p.Label.String()
	}
	if p.Field != nil {
		field = p.Field.String()
	}
	return rv, fmt.Sprintf("%s\x00%t\x00%t\x00%s\x00%s", key, opts.Recursive, opts.ProgressNotify, label, field), true
}
