package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"portal.dev/portal/e2e/framework"
)

// loadWatcher is one client's watch of the ConfigMaps of all namespaces.
type loadWatcher struct {
	mu      sync.Mutex
	rvs     []uint64 // resource versions of the test's ConfigMaps, as they came
	ended   bool     // the server ended the watch while the client read
	errs    []string
	stopped bool
}

func (w *loadWatcher) read(wi watch.Interface) {
	for ev := range wi.ResultChan() {
		w.mu.Lock()
		switch cm, ok := ev.Object.(*corev1.ConfigMap); {
		case ev.Type == watch.Error:
			w.errs = append(w.errs, fmt.Sprint(ev.Object))
		case ok && ev.Type == watch.Added && cm.Labels["e2e"] == "watch-load":
			rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
			w.rvs = append(w.rvs, rv)
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.ended = !w.stopped
	w.mu.Unlock()
}

// TestWatchersNotDroppedUnderLoad: 200 watches of ConfigMaps from one
// list's version, each on a connection of its own, while 50 clients create
// 2,000 ConfigMaps. Every watch stays open and gets every ConfigMap, in
// order (#23: on a busy two-core machine the watch cache ended every such
// watch as unresponsive, over and over, though its client kept reading).
// A ConfigMap is created after the first half of the watches opened, as a
// controller may create one between a client's list and its watch: the
// watches still share the watch cache's watch, which the cache then ends
// as unresponsive a few times at most, where it ended hundreds of watches
// when each watch after the change had one of its own.
func TestWatchersNotDroppedUnderLoad(t *testing.T) {
	s := framework.StartServer(t, "--disable", "dns,proxy,agent,ingress")
	ctx := context.Background()
	const watchers, writers, perWriter = 200, 50, 40
	client := s.Client()
	for i := range writers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("watch-load-%d", i)}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	terminatedBefore := terminatedConfigMapWatchers(t, s)
	var ws []*loadWatcher
	var wis []watch.Interface
	for i := range watchers {
		if i == watchers/2 {
			createBetween(t, s, ws[0])
		}
		wi, err := ownConnection(t, s).CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		w := &loadWatcher{}
		go w.read(wi)
		ws, wis = append(ws, w), append(wis, wi)
	}
	defer func() {
		for i, w := range ws {
			w.mu.Lock()
			w.stopped = true
			w.mu.Unlock()
			wis[i].Stop()
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cms := ownConnection(t, s).CoreV1().ConfigMaps(fmt.Sprintf("watch-load-%d", i))
			for n := range perWriter {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", n), Labels: map[string]string{"e2e": "watch-load"}},
					Data:       map[string]string{"key": strings.Repeat("v", 64)},
				}
				if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}

	const want = writers*perWriter + 1 // and the one created between the watches
	eventuallyWithin(t, 2*time.Minute, "every watch gets every ConfigMap", func() (bool, string) {
		behind, ended := 0, 0
		for _, w := range ws {
			w.mu.Lock()
			if w.ended {
				ended++
			} else if len(w.rvs) < want {
				behind++
			}
			w.mu.Unlock()
		}
		if ended > 0 {
			t.Fatalf("the server ended %d of %d watches while their clients read", ended, watchers)
		}
		return behind == 0, fmt.Sprintf("%d watches have not got all %d ConfigMaps", behind, want)
	})
	for i, w := range ws {
		w.mu.Lock()
		if len(w.errs) > 0 {
			t.Errorf("watch %d: error events: %v", i, w.errs)
		}
		if len(w.rvs) != want {
			t.Errorf("watch %d: got %d ConfigMaps, want %d", i, len(w.rvs), want)
		}
		for j := 1; j < len(w.rvs); j++ {
			if w.rvs[j] <= w.rvs[j-1] {
				t.Errorf("watch %d: event %d has version %d after %d, want increasing", i, j, w.rvs[j], w.rvs[j-1])
				break
			}
		}
		w.mu.Unlock()
	}
	n := terminatedConfigMapWatchers(t, s) - terminatedBefore
	t.Logf("the watch cache ended %d ConfigMap watches as unresponsive", n)
	if n >= watchers/10 {
		t.Errorf("the watch cache ended %d ConfigMap watches as unresponsive, want fewer than %d (the clients' watches share one)", n, watchers/10)
	}
}

// createBetween creates a ConfigMap of the test's and waits until w, an
// open watch, got it.
func createBetween(t *testing.T, s *framework.Server, w *loadWatcher) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "between", Labels: map[string]string{"e2e": "watch-load"}}}
	if _, err := s.Client().CoreV1().ConfigMaps("watch-load-0").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, 30*time.Second, "the first watch gets the ConfigMap created between the watches", func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.rvs) == 1, fmt.Sprintf("it got %d", len(w.rvs))
	})
}

// terminatedConfigMapWatchers is how many ConfigMap watches the server's
// watch cache has ended as unresponsive.
func terminatedConfigMapWatchers(t *testing.T, s *framework.Server) int {
	t.Helper()
	data, err := s.Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const series = `apiserver_terminated_watchers_total{group="",resource="configmaps"} `
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, series); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return int(n)
		}
	}
	return 0 // none ended yet
}

// ownConnection is an admin client on a connection of its own, as a
// separate process would have: client-go shares one among clients of equal
// settings unless a proxy function is set.
func ownConnection(t *testing.T, s *framework.Server) kubernetes.Interface {
	cfg := s.RESTConfig()
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	c, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
