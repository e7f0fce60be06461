package watchshare

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
)

// source is an upstream watch with an unbuffered channel: a send completes
// only once the group has taken the event, as a cacher's full channel
// would block its dispatcher.
type source struct {
	ch      chan watch.Event
	stopped chan struct{}
	once    sync.Once
}

func (s *source) ResultChan() <-chan watch.Event { return s.ch }
func (s *source) Stop()                          { s.once.Do(func() { close(s.stopped) }) }

// send delivers events of resource versions from..to and returns how many
// were taken before the group stopped the source.
func (s *source) send(from, to int) int {
	for i := from; i <= to; i++ {
		select {
		case s.ch <- event(i):
		case <-s.stopped:
			return i - from
		}
	}
	return to - from + 1
}

func event(rv int) watch.Event {
	return watch.Event{Type: watch.Added, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(rv)}}}
}

// fakeStorage records the watches opened on it.
type fakeStorage struct {
	storage.Interface
	mu      sync.Mutex
	sources []*source
	rvs     []string // the version each watch started from
	ctxs    []context.Context
	opens   chan *source
}

func newFakeStorage() *fakeStorage { return &fakeStorage{opens: make(chan *source, 100)} }

func (f *fakeStorage) Versioner() storage.Versioner { return storage.APIObjectVersioner{} }

func (f *fakeStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &source{ch: make(chan watch.Event), stopped: make(chan struct{})}
	f.sources = append(f.sources, s)
	f.rvs = append(f.rvs, opts.ResourceVersion)
	f.ctxs = append(f.ctxs, ctx)
	f.opens <- s
	return s, nil
}

func (f *fakeStorage) opened() []*source {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*source(nil), f.sources...)
}

func watchFrom(t *testing.T, s storage.Interface, rv string) watch.Interface {
	t.Helper()
	w, err := s.Watch(context.Background(), "/configmaps", storage.ListOptions{ResourceVersion: rv, Recursive: true, Predicate: storage.Everything})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fail ends the group's watch with an error event, which ends its members
// after the events they have queued.
func (s *source) fail() {
	s.ch <- watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Code: 410}}
}

// readAll reads w until its result channel closes and returns the
// resource versions in the order they came.
func readAll(t *testing.T, w watch.Interface) []int {
	t.Helper()
	var got []int
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			continue
		}
		rv, err := strconv.Atoi(ev.Object.(*corev1.ConfigMap).ResourceVersion)
		if err != nil {
			t.Fatalf("event %v: %v", ev, err)
		}
		got = append(got, rv)
	}
	return got
}

func checkRange(t *testing.T, name string, got []int, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Errorf("%s: got %d events, want %d (versions %d to %d)", name, len(got), to-from+1, from, to)
	}
	for i, rv := range got {
		if rv != from+i {
			t.Errorf("%s: event %d has version %d, want %d (in order, none missing)", name, i, rv, from+i)
			return
		}
	}
}

// Watchers that read nothing while the cacher dispatches a burst larger
// than any of its channels get the whole burst, in order, once they read:
// the regression of #23, where such watchers were ended as unresponsive.
// They share one watch of the storage.
func TestSlowReadersGetEveryEvent(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, 5000)
	var ws []watch.Interface
	for range 20 {
		ws = append(ws, watchFrom(t, s, "100"))
	}
	if n := len(f.opened()); n != 1 {
		t.Fatalf("20 watches from one version opened %d storage watches, want 1", n)
	}
	src := f.opened()[0]
	if sent := src.send(101, 3100); sent != 3000 {
		t.Fatalf("the group took %d of 3000 events", sent)
	}
	src.fail() // the members end after the events they have queued
	for i, w := range ws {
		checkRange(t, "watch "+strconv.Itoa(i), readAll(t, w), 101, 3100)
	}
}

// Watches from one list's version that open after the group passed on an
// event share its storage watch and get the events they missed first: the
// regression of #23 where, when a ConfigMap was created between the
// bench's list and its 200 watches, each watch after the first change
// started a group of its own, and the cacher, with 180 watchers of 10
// events each, ended them hundreds of times at the start of the load. Each
// member owns the plain objects it gets from the history too.
func TestWatchFromAPassedVersionJoinsFromHistory(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	first := watchFrom(t, s, "100")
	src := f.opened()[0]
	src.send(101, 101)
	var late []watch.Interface
	for range 19 {
		late = append(late, watchFrom(t, s, "100"))
		// A storage watch from 100 replays 101 at once, as the
		// cacher replays the events after a watch's version.
		if ups := f.opened(); ups[len(ups)-1] != src {
			ups[len(ups)-1].send(101, 101)
		}
	}
	if n := len(f.opened()); n != 1 {
		t.Fatalf("20 watches from version 100, 19 of them after the group passed 101, opened %d storage watches, want 1", n)
	}
	src.send(102, 110)
	src.fail()
	got := readEvents(first)
	checkRange(t, "first", versions(t, got), 101, 110)
	for i, w := range late {
		evs := readEvents(w)
		checkRange(t, "late watch "+strconv.Itoa(i), versions(t, evs), 101, 110)
		if len(evs) > 0 && len(got) > 0 && evs[0].Object == got[0].Object {
			t.Errorf("late watch %d got the first watch's object of version 101, want its own", i)
		}
	}
}

// A watch from a version older than the group's history gets a storage
// watch of its own; one from a version the history covers, or a later one,
// joins and gets only the events after its version.
func TestJoinOnlyWithoutGap(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	first := watchFrom(t, s, "100")
	src := f.opened()[0]
	last := 110 + historySize
	src.send(101, last)
	behind := watchFrom(t, s, "105")
	covered := watchFrom(t, s, strconv.Itoa(last-5))
	ahead := watchFrom(t, s, strconv.Itoa(last+5))
	if n := len(f.opened()); n != 2 {
		t.Fatalf("storage watches = %d, want 2 (the first group, and one for the watch from 105)", n)
	}
	src.send(last+1, last+10)
	src.fail()
	checkRange(t, "first", readAll(t, first), 101, last+10)
	checkRange(t, "from the history", readAll(t, covered), last-4, last+10)
	checkRange(t, "from a later version", readAll(t, ahead), last+6, last+10)
	own := f.opened()[1]
	own.send(106, 107)
	own.fail()
	checkRange(t, "from 105", readAll(t, behind), 106, 107)
}

// readEvents reads w until its result channel closes and returns its
// events other than errors.
func readEvents(w watch.Interface) []watch.Event {
	var got []watch.Event
	for ev := range w.ResultChan() {
		if ev.Type != watch.Error {
			got = append(got, ev)
		}
	}
	return got
}

// versions returns the resource versions of evs.
func versions(t *testing.T, evs []watch.Event) []int {
	t.Helper()
	var got []int
	for _, ev := range evs {
		rv, err := strconv.Atoi(ev.Object.(*corev1.ConfigMap).ResourceVersion)
		if err != nil {
			t.Fatalf("event %v: %v", ev, err)
		}
		got = append(got, rv)
	}
	return got
}

// A client that never reads cannot make the server hold events without
// bound: at its limit its watch ends with a prefix of the events, so it
// resumes without a gap, and the others go on.
func TestOverflowEndsOnlyThatWatch(t *testing.T) {
	const limit = 50
	f := newFakeStorage()
	s := Share(f, nil, limit)
	stuck := watchFrom(t, s, "1")
	reader := watchFrom(t, s, "1")
	src := f.opened()[0]
	last := 1 + limit + outSize + 10
	// The reader takes each event before the next is sent.
	for rv := 2; rv <= last; rv++ {
		src.send(rv, rv)
		ev := <-reader.ResultChan()
		if got := ev.Object.(*corev1.ConfigMap).ResourceVersion; got != strconv.Itoa(rv) {
			t.Fatalf("reader got version %s, want %d", got, rv)
		}
	}
	stuckGot := readAll(t, stuck)
	// At most what was in its result buffer and the one its goroutine
	// held: none if its goroutine had not run before the overflow.
	if len(stuckGot) > outSize+1 {
		t.Errorf("the stuck watch got %d events, want at most %d", len(stuckGot), outSize+1)
	}
	checkRange(t, "stuck", stuckGot, 2, 1+len(stuckGot))
	src.send(last+1, last+1)
	src.fail()
	checkRange(t, "reader, after the stuck watch ended", readAll(t, reader), last+1, last+1)
}

// When the storage ends the group's watch, as the cacher ends a watcher it
// finds unresponsive, the group watches again from the last version it
// passed on: its members see every event, once, in order, and stay open.
func TestStorageEndingTheWatchIsInvisible(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	a, b := watchFrom(t, s, "100"), watchFrom(t, s, "100")
	src := <-f.opens
	src.send(101, 110)
	close(src.ch)
	again := <-f.opens
	f.mu.Lock()
	from := f.rvs[1]
	f.mu.Unlock()
	if from != "110" {
		t.Errorf("the group watched again from version %s, want 110", from)
	}
	again.send(111, 120)
	again.fail()
	checkRange(t, "a", readAll(t, a), 101, 120)
	checkRange(t, "b", readAll(t, b), 101, 120)
}

// The last member to stop stops the storage's watch; a new watch then
// starts a new one.
func TestStop(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	a, b := watchFrom(t, s, "1"), watchFrom(t, s, "1")
	src := f.opened()[0]
	src.send(2, 5)
	a.Stop()
	readAll(t, a)
	select {
	case <-src.stopped:
		t.Fatal("the storage watch stopped while a member was left")
	default:
	}
	b.Stop()
	b.Stop() // a second Stop is harmless
	readAll(t, b)
	<-src.stopped
	watchFrom(t, s, "5")
	if n := len(f.opened()); n != 2 {
		t.Errorf("storage watches = %d, want 2", n)
	}
}

// Watches with initial events are the storage's own.
func TestNotShared(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name string
		opts storage.ListOptions
	}{
		{"version 0", storage.ListOptions{ResourceVersion: "0"}},
		{"no version", storage.ListOptions{}},
		{"initial events", storage.ListOptions{ResourceVersion: "5", SendInitialEvents: &yes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeStorage()
			s := Share(f, nil, DefaultLimit)
			w1, _ := s.Watch(context.Background(), "/configmaps", tc.opts)
			w2, _ := s.Watch(context.Background(), "/configmaps", tc.opts)
			if w1 != watch.Interface(f.opened()[0]) || w2 != watch.Interface(f.opened()[1]) {
				t.Errorf("got shared watches, want the storage's own")
			}
		})
	}
}

// An upstream watch that ends the group with an error is stopped, not left
// to the members, which no longer stop a finished group's watch: the etcd
// watcher keeps its etcd watch open after an error until it is stopped
// (review finding 3 of #23).
func TestErrorStopsTheStorageWatch(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	w := watchFrom(t, s, "100")
	src := <-f.opens
	src.send(101, 101)
	src.fail()
	readAll(t, w)
	select {
	case <-src.stopped:
	default:
		t.Error("the storage watch that sent the error was not stopped, want stopped")
	}
}

// A watch from a newer version does not join a group whose start the
// storage has not accepted yet: when the storage answers the group's older
// version with 410 Gone, only the older watch gets it (review finding 2
// of #23, where both did and the newer client relisted for nothing).
func TestNewerWatchDoesNotShareAnUnconfirmedStart(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	old := watchFrom(t, s, "5")
	newer := watchFrom(t, s, "100")
	if n := len(f.opened()); n != 2 {
		t.Fatalf("storage watches = %d, want 2 (the watch from 100 must not join the unconfirmed start at 5)", n)
	}
	first, second := <-f.opens, <-f.opens
	first.fail()
	if got := readTypes(old); len(got) != 1 || got[0] != watch.Error {
		t.Errorf("watch from 5 got %v, want [ERROR]", got)
	}
	second.send(101, 102)
	second.fail()
	checkRange(t, "watch from 100", readAll(t, newer), 101, 102)
}

// readTypes reads w until its result channel closes and returns the event
// types in the order they came.
func readTypes(w watch.Interface) []watch.EventType {
	var got []watch.EventType
	for ev := range w.ResultChan() {
		got = append(got, ev.Type)
	}
	return got
}

// cacheable is an object with cached serializations, as the cacher's
// cachingObject: its encoding does not write to it.
type cacheable struct{ *corev1.ConfigMap }

func (c cacheable) CacheEncode(_ runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return encode(c.ConfigMap, w)
}
func (c cacheable) GetObject() runtime.Object { return c.ConfigMap }

// Each member owns the plain objects it gets, which its request handler's
// encoder writes to (the type meta), and shares only objects with cached
// serializations: review finding 1 of #23, a data race under -race when
// two clients watched from one version.
func TestMembersOwnPlainObjects(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	a, b := watchFrom(t, s, "100"), watchFrom(t, s, "100")
	src := <-f.opens
	plain := event(101)
	cached := watch.Event{Type: watch.Modified, Object: cacheable{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "102"}}}}
	go func() {
		src.ch <- plain
		src.ch <- cached
		src.fail()
	}()
	var got [2][]runtime.Object
	var wg sync.WaitGroup
	for i, w := range []watch.Interface{a, b} {
		wg.Go(func() {
			for ev := range w.ResultChan() {
				if _, ok := ev.Object.(runtime.CacheableObject); !ok {
					// What the watch encoder does to a plain object.
					ev.Object.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				}
				got[i] = append(got[i], ev.Object)
			}
		})
	}
	wg.Wait()
	if len(got[0]) != 3 || len(got[1]) != 3 {
		t.Fatalf("got %d and %d events, want 3 each", len(got[0]), len(got[1]))
	}
	if got[0][0] == got[1][0] {
		t.Error("both members got the same plain object, want one each")
	}
	if got[0][1] != got[1][1] {
		t.Error("members got copies of the cacheable object, want it shared")
	}
}

type ctxKey struct{}

// signal counts the priority and fairness "watch initialized" signals.
type signal struct{ n atomic.Int32 }

func (s *signal) Signal() { s.n.Add(1) }
func (s *signal) Wait()   {}

// The group's watch keeps nothing of the request that opened it (audit,
// tracing, user, deadline) but the namespace and request info that scope
// the cacher's watch, and every member's request is told it is set up
// (review finding 5 of #23).
func TestGroupKeepsOnlyTheScopeOfTheFirstRequest(t *testing.T) {
	f := newFakeStorage()
	s := Share(f, nil, DefaultLimit)
	info := &request.RequestInfo{IsResourceRequest: true, Verb: "watch", Namespace: "ns", Resource: "configmaps"}
	var sigs [2]signal
	for i := range sigs {
		ctx := request.WithRequestInfo(request.WithNamespace(context.Background(), "ns"), info)
		ctx = utilflowcontrol.WithInitializationSignal(context.WithValue(ctx, ctxKey{}, "first user's"), &sigs[i])
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if _, err := s.Watch(ctx, "/configmaps/ns", storage.ListOptions{ResourceVersion: "100", Recursive: true, Predicate: storage.Everything}); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	ctxs := f.ctxs
	f.mu.Unlock()
	if len(ctxs) != 1 {
		t.Fatalf("storage watches = %d, want 1", len(ctxs))
	}
	up := ctxs[0]
	if v := up.Value(ctxKey{}); v != nil {
		t.Errorf("the group's context holds the request's value %v, want none", v)
	}
	if up.Done() != nil {
		t.Error("the group's context ends with the request, want never")
	}
	if ns, _ := request.NamespaceFrom(up); ns != "ns" {
		t.Errorf("the group's namespace = %q, want ns", ns)
	}
	if got, ok := request.RequestInfoFrom(up); !ok || got.Resource != "configmaps" || got.Namespace != "ns" {
		t.Errorf("the group's request info = %+v, want the request's", got)
	}
	for i := range sigs {
		if n := sigs[i].n.Load(); n == 0 {
			t.Errorf("request %d was not told its watch is set up", i)
		}
	}
}

func newConfigMap() runtime.Object { return &corev1.ConfigMap{} }

// A member whose client asked for bookmarks sends one of the group's
// newest version 2 s before its request's deadline, as the cacher does, so
// the client resumes from a recent version when its watch times out; a
// member whose client did not ask sends none (review finding 4 of #23).
func TestBookmarkBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStorage()
		s := Share(f, newConfigMap, DefaultLimit)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		watchWith := func(bookmarks bool) watch.Interface {
			p := storage.Everything
			p.AllowWatchBookmarks = bookmarks
			w, err := s.Watch(ctx, "/configmaps", storage.ListOptions{ResourceVersion: "100", Recursive: true, Predicate: p})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		with, without := watchWith(true), watchWith(false)
		src := <-f.opens
		src.send(101, 105)
		time.Sleep(10*time.Minute - 2*time.Second)
		synctest.Wait()
		if got, want := drain(with), "ADDED 101,ADDED 102,ADDED 103,ADDED 104,ADDED 105,BOOKMARK 105"; got != want {
			t.Errorf("watch with bookmarks got %s, want %s", got, want)
		}
		if got, want := drain(without), "ADDED 101,ADDED 102,ADDED 103,ADDED 104,ADDED 105"; got != want {
			t.Errorf("watch without bookmarks got %s, want %s", got, want)
		}
		with.Stop()
		without.Stop()
		synctest.Wait() // the last member to leave stops the group
		close(src.ch)
	})
}

// drain returns the events w has ready, as "TYPE version" joined by commas.
func drain(w watch.Interface) string {
	var got []string
	for {
		select {
		case ev := <-w.ResultChan():
			rv := ev.Object.(*corev1.ConfigMap).ResourceVersion
			got = append(got, string(ev.Type)+" "+rv)
		default:
			return strings.Join(got, ",")
		}
	}
}

// opener is a watch a client opens: from a version, with a label selector,
// asking for bookmarks or not.
type opener struct {
	rv        string
	label     string
	bookmarks bool
}

// step is one thing that happens: a client opens a watch, or the storage
// watch opened up-th (from 0) sends events.
type step struct {
	open   *opener
	up     int
	events []watch.Event
}

func added(rv int) watch.Event { return event(rv) }
func bookmarkAt(rv int) watch.Event {
	return watch.Event{Type: watch.Bookmark, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(rv)}}}
}

var gone = watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Code: 410}}

// Clients at different versions, with different selectors and bookmark
// choices, each get exactly their events, and share a storage watch only
// when they may (review finding 8 of #23). Every case ends with an error
// from every storage watch, which ends every watch.
func TestWhatEachClientGets(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		want  []string // per watch, in the order opened
		opens int      // storage watches
	}{{
		name: "same version and selector: shared",
		steps: []step{
			{open: &opener{rv: "100"}}, {open: &opener{rv: "100"}},
			{up: 0, events: []watch.Event{added(101), added(102), gone}},
		},
		want:  []string{"ADDED 101,ADDED 102,ERROR", "ADDED 101,ADDED 102,ERROR"},
		opens: 1,
	}, {
		name: "different label selectors: not shared",
		steps: []step{
			{open: &opener{rv: "100", label: "app=a"}}, {open: &opener{rv: "100", label: "app=b"}},
			{up: 0, events: []watch.Event{added(101), gone}},
			{up: 1, events: []watch.Event{added(102), gone}},
		},
		want:  []string{"ADDED 101,ERROR", "ADDED 102,ERROR"},
		opens: 2,
	}, {
		name: "older version than the group's start: a group of its own",
		steps: []step{
			{open: &opener{rv: "100"}}, {open: &opener{rv: "50"}}, {open: &opener{rv: "100"}},
			{up: 0, events: []watch.Event{added(101), gone}},
			{up: 1, events: []watch.Event{added(60), added(101), gone}},
		},
		want:  []string{"ADDED 101,ERROR", "ADDED 60,ADDED 101,ERROR", "ADDED 101,ERROR"},
		opens: 2,
	}, {
		name: "version the group passed: joins with the events after it, no old bookmarks",
		steps: []step{
			{open: &opener{rv: "100", bookmarks: true}},
			{up: 0, events: []watch.Event{added(101), bookmarkAt(102), added(103)}},
			{open: &opener{rv: "101", bookmarks: true}}, {open: &opener{rv: "103"}},
			{up: 0, events: []watch.Event{added(104), bookmarkAt(105), gone}},
		},
		want: []string{
			"ADDED 101,BOOKMARK 102,ADDED 103,ADDED 104,BOOKMARK 105,ERROR",
			"ADDED 103,ADDED 104,BOOKMARK 105,ERROR",
			"ADDED 104,ERROR",
		},
		opens: 1,
	}, {
		name: "bookmarks only to clients that asked, and only after their version",
		steps: []step{
			{open: &opener{rv: "100", bookmarks: true}}, {open: &opener{rv: "100"}},
			{up: 0, events: []watch.Event{added(101), bookmarkAt(105)}},
			{open: &opener{rv: "105", bookmarks: true}},
			{up: 0, events: []watch.Event{bookmarkAt(105), added(106), bookmarkAt(110), gone}},
		},
		want: []string{
			"ADDED 101,BOOKMARK 105,BOOKMARK 105,ADDED 106,BOOKMARK 110,ERROR",
			"ADDED 101,ADDED 106,ERROR",
			"ADDED 106,BOOKMARK 110,ERROR",
		},
		opens: 1,
	}, {
		name: "error after a newer client joined a started group: both get it",
		steps: []step{
			{open: &opener{rv: "100"}},
			{up: 0, events: []watch.Event{added(101), added(105)}},
			{open: &opener{rv: "105"}},
			{up: 0, events: []watch.Event{added(106), gone}},
		},
		want:  []string{"ADDED 101,ADDED 105,ADDED 106,ERROR", "ADDED 106,ERROR"},
		opens: 1,
	}, {
		name: "error at the start of a group: not given to a newer client",
		steps: []step{
			{open: &opener{rv: "5"}}, {open: &opener{rv: "100"}},
			{up: 0, events: []watch.Event{gone}},
			{up: 1, events: []watch.Event{added(101), gone}},
		},
		want:  []string{"ERROR", "ADDED 101,ERROR"},
		opens: 2,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeStorage()
			s := Share(f, nil, DefaultLimit)
			var ws []watch.Interface
			var ups []*source
			for _, st := range tc.steps {
				if o := st.open; o != nil {
					p := storage.Everything
					p.AllowWatchBookmarks = o.bookmarks
					if o.label != "" {
						sel, err := labels.Parse(o.label)
						if err != nil {
							t.Fatal(err)
						}
						p.Label = sel
					}
					w, err := s.Watch(context.Background(), "/configmaps", storage.ListOptions{ResourceVersion: o.rv, Recursive: true, Predicate: p})
					if err != nil {
						t.Fatal(err)
					}
					ws = append(ws, w)
					continue
				}
				for len(ups) <= st.up {
					select {
					case up := <-f.opens:
						ups = append(ups, up)
					default:
						// Watch opens the storage's watch before it
						// returns.
						t.Fatalf("storage watches = %d, want at least %d", len(ups), st.up+1)
					}
				}
				for _, ev := range st.events {
					ups[st.up].ch <- ev
				}
			}
			if n := len(f.opened()); n != tc.opens {
				// The watches of a storage watch the steps do
				// not feed would never end.
				t.Fatalf("storage watches = %d, want %d", n, tc.opens)
			}
			for i, w := range ws {
				if got := describe(w); got != tc.want[i] {
					t.Errorf("watch %d got %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
}

// describe reads w until its result channel closes and returns its events
// as "TYPE version" joined by commas ("ERROR" for an error).
func describe(w watch.Interface) string {
	var got []string
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			got = append(got, string(ev.Type))
			continue
		}
		got = append(got, string(ev.Type)+" "+ev.Object.(*corev1.ConfigMap).ResourceVersion)
	}
	return strings.Join(got, ",")
}

// A group forgets the events it passed on more than historyAge ago, once
// an event or a bookmark passes after that, so that an idle group does not
// hold its last events for good: a watch from before them then gets a
// storage watch of its own.
func TestHistoryForgetsOldEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeStorage()
		s := Share(f, newConfigMap, DefaultLimit)
		first := watchFrom(t, s, "100")
		src := f.opened()[0]
		src.send(101, 105)
		time.Sleep(historyAge / 2)
		recent := watchFrom(t, s, "102")
		if n := len(f.opened()); n != 1 {
			t.Fatalf("storage watches = %d after a watch from a version the history holds, want 1", n)
		}
		time.Sleep(historyAge)
		src.ch <- watch.Event{Type: watch.Bookmark, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "105"}}}
		synctest.Wait() // the group has passed the bookmark on
		late := watchFrom(t, s, "102")
		if n := len(f.opened()); n != 2 {
			t.Fatalf("storage watches = %d after a watch from a version whose events are older than %v, want 2", n, historyAge)
		}
		src.fail()
		checkRange(t, "first", readAll(t, first), 101, 105)
		checkRange(t, "recent", readAll(t, recent), 103, 105)
		own := f.opened()[1]
		own.send(103, 105)
		own.fail()
		checkRange(t, "late", readAll(t, late), 103, 105)
	})
}
