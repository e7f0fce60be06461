package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// label marks the bench's ConfigMaps: the controllers add one of their
// own (kube-root-ca.crt) to every namespace.
const label = "bench"

// load is the clients and the watchers of one run.
type load struct {
	opts     options
	clients  []kubernetes.Interface
	watchers []*watcher
	// created[i] is how many ConfigMaps client i created.
	created []atomic.Int64
	// conns are the HTTP clients of the clients and the watchers, one
	// connection each.
	conns []*http.Client

	creates, lists, errors atomic.Int64
}

// watcher is one watch of ConfigMaps, reopened from its last resource
// version when the server ends it, as an informer would.
type watcher struct {
	client    kubernetes.Interface
	namespace string // "" for all namespaces
	rv        string

	mu         sync.Mutex
	stopped    bool
	w          watch.Interface
	seen       int64 // bench ConfigMaps added
	lastRV     uint64
	dropped    int // watches the server ended
	outOfOrder int
	errs       []string
}

func newLoad(ctx context.Context, cfg *rest.Config, o options) (*load, error) {
	l := &load{opts: o, created: make([]atomic.Int64, o.clients)}
	for i := range o.clients {
		c, err := l.newClient(cfg)
		if err != nil {
			return nil, err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(i)}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		l.clients = append(l.clients, c)
	}
	list, err := l.clients[0].CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	for i := range o.watchers {
		c, err := l.newClient(cfg)
		if err != nil {
			return nil, err
		}
		w := &watcher{client: c, rv: list.ResourceVersion}
		if o.scope == "namespace" {
			w.namespace = namespace(i % o.clients)
		}
		if err := w.open(ctx); err != nil {
			return nil, fmt.Errorf("watch %d: %w", i, err)
		}
		go w.read(ctx)
		l.watchers = append(l.watchers, w)
	}
	return l, nil
}

// newClient returns a client on a connection of its own.
func (l *load) newClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := ownConnection(cfg)
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	l.conns = append(l.conns, hc)
	return kubernetes.NewForConfigAndClient(c, hc)
}

// closeConnections ends the clients' connections, as processes that exit.
func (l *load) closeConnections() {
	for _, hc := range l.conns {
		hc.CloseIdleConnections()
	}
}

func namespace(i int) string { return fmt.Sprintf("load-%d", i) }

// run creates and lists ConfigMaps from every client until ctx ends.
func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, c := range l.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.client(ctx, i, c)
		}()
	}
	wg.Wait()
}

// client creates a small ConfigMap, then lists its namespace, in a loop
// until the load ends. A request under way then completes, so that every
// ConfigMap created is counted.
func (l *load) client(until context.Context, i int, c kubernetes.Interface) {
	ctx := context.Background()
	cms := c.CoreV1().ConfigMaps(namespace(i))
	for n := 0; until.Err() == nil; n++ {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", n), Labels: map[string]string{label: "apiload"}},
			Data:       map[string]string{"key": strings.Repeat("v", 64)},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			l.errors.Add(1)
			continue
		}
		l.created[i].Add(1)
		l.creates.Add(1)
		if _, err := cms.List(ctx, metav1.ListOptions{}); err != nil {
			l.errors.Add(1)
			continue
		}
		l.lists.Add(1)
	}
}

func (w *watcher) open(ctx context.Context) error {
	wi, err := w.client.CoreV1().ConfigMaps(w.namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: w.rv})
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		wi.Stop()
		return context.Canceled
	}
	w.w = wi
	return nil
}

// read counts the bench's ConfigMaps the watch delivers and checks their
// order; when the server ends the watch it counts a drop and watches again
// from the last version seen.
func (w *watcher) read(ctx context.Context) {
	for {
		w.mu.Lock()
		wi := w.w
		w.mu.Unlock()
		for ev := range wi.ResultChan() {
			w.event(ev)
		}
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return
		}
		w.dropped++
		w.mu.Unlock()
		if err := w.open(ctx); err != nil {
			w.mu.Lock()
			w.errs = append(w.errs, "reopen: "+err.Error())
			w.mu.Unlock()
			return
		}
	}
}

func (w *watcher) event(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Type == watch.Error {
		if w.stopped {
			return
		}
		w.errs = append(w.errs, fmt.Sprint(ev.Object))
		return
	}
	cm, ok := ev.Object.(*corev1.ConfigMap)
	if !ok {
		return
	}
	rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	if rv <= w.lastRV {
		w.outOfOrder++
	}
	w.lastRV = rv
	w.rv = cm.ResourceVersion
	if ev.Type == watch.Added && cm.Labels[label] != "" {
		w.seen++
	}
}

// expected is how many bench ConfigMaps watcher w should see.
func (l *load) expected(w *watcher) int64 {
	if w.namespace == "" {
		return l.creates.Load()
	}
	var i int
	fmt.Sscanf(w.namespace, "load-%d", &i)
	return l.created[i].Load()
}

// delivered is the bench ConfigMaps seen by all watchers together.
func (l *load) delivered() int64 {
	var n int64
	for _, w := range l.watchers {
		w.mu.Lock()
		n += w.seen
		w.mu.Unlock()
	}
	return n
}

func (l *load) droppedSoFar() int {
	n := 0
	for _, w := range l.watchers {
		w.mu.Lock()
		n += w.dropped
		w.mu.Unlock()
	}
	return n
}

// finish waits up to d for the watchers to have seen every create, then
// stops them and closes every connection.
func (l *load) finish(d time.Duration) {
	deadline := time.Now().Add(d)
	for l.watchSummary().complete < len(l.watchers) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	l.stop()
	l.closeConnections()
}

func (l *load) stop() {
	for _, w := range l.watchers {
		w.mu.Lock()
		w.stopped = true
		w.w.Stop()
		w.mu.Unlock()
	}
}

type watchSummary struct {
	dropped, complete, outOfOrder int
}

func (l *load) watchSummary() watchSummary {
	var s watchSummary
	for _, w := range l.watchers {
		want := l.expected(w)
		w.mu.Lock()
		s.dropped += w.dropped
		s.outOfOrder += w.outOfOrder
		if w.seen == want {
			s.complete++
		}
		w.mu.Unlock()
	}
	return s
}

// printErrors prints the first errors the watchers saw.
func (l *load) printErrors(max int) {
	for _, w := range l.watchers {
		w.mu.Lock()
		for _, e := range w.errs {
			if max == 0 {
				break
			}
			fmt.Println("# watch error:", e)
			max--
		}
		w.mu.Unlock()
	}
}
