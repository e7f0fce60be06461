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

// TestWatchersNotDroppedUnderLoad: 200 watches of ConfigMaps, each on a
// connection of its own, while 50 clients create 2,000 ConfigMaps. Every
// watch stays open and gets every ConfigMap, in order (#23: on a busy
// two-core machine the watch cache ended every such watch as unresponsive,
// over and over, though its client kept reading).
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
	var ws []*loadWatcher
	var wis []watch.Interface
	for range watchers {
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

	const want = writers * perWriter
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
