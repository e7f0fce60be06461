package metricsapi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"portal.dev/portal/internal/resourcemetrics"
)

// fakeNode is an agent whose busy container uses 1.5 cores and whose
// idle one none, read at the (fake) clock's time.
type fakeNode struct {
	mu    sync.Mutex
	start time.Time
	calls int
}

func (f *fakeNode) fetch(_ context.Context, n *corev1.Node) (resourcemetrics.Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	now := time.Now()
	busy := now.Sub(f.start).Seconds() * 1.5
	u := func(cpu float64, mem uint64) resourcemetrics.Usage {
		return resourcemetrics.Usage{CPUSeconds: cpu, MemoryBytes: mem, Time: now}
	}
	return resourcemetrics.Sample{
		Node: u(100+busy, 4<<30),
		Pods: []resourcemetrics.Pod{
			{Namespace: "default", Name: "busy", Usage: u(busy, 1<<20), Containers: []resourcemetrics.Container{{Name: "spin", Usage: u(busy, 1<<20)}}},
			{Namespace: "other", Name: "idle", Usage: u(0.001, 2<<20), Containers: []resourcemetrics.Container{{Name: "sleep", Usage: u(0.001, 2<<20)}}},
		},
	}, nil
}

func listers(t *testing.T) (corelisters.NodeLister, corelisters.PodLister) {
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range []any{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "busy", Labels: map[string]string{"app": "spin"}},
			Spec: corev1.PodSpec{NodeName: "n1"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "idle"}, Spec: corev1.PodSpec{NodeName: "n1"}},
	} {
		var err error
		if n, ok := o.(*corev1.Node); ok {
			err = nodes.Add(n)
		} else {
			err = pods.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewNodeLister(nodes), corelisters.NewPodLister(pods)
}

// TestScraperRates runs the scraper on a fake clock: nothing is served
// before two scrapes, then the CPU rate over the window between them.
func TestScraperRates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes, pods := listers(t)
		agent := &fakeNode{start: time.Now()}
		store := &Store{}
		s := &Scraper{Nodes: nodes, Fetch: agent.fetch, Store: store, Interval: 10 * time.Second}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		synctest.Wait()
		if _, ok := store.Node("n1"); ok {
			t.Fatal("got node metrics after one scrape, want none until a window exists")
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		nm, ok := store.Node("n1")
		if !ok {
			t.Fatal("got no node metrics after two scrapes")
		}
		if got := nm.Usage.Cpu().MilliValue(); got != 1500 {
			t.Errorf("node cpu: got %dm, want 1500m", got)
		}
		if nm.Window.Duration != 10*time.Second {
			t.Errorf("window: got %v, want 10s", nm.Window.Duration)
		}
		podREST := NewPodREST(store, pods)
		ctxAll := genericapirequest.WithNamespace(t.Context(), "")
		obj, err := podREST.List(ctxAll, &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list := obj.(*metricsv1beta1.PodMetricsList)
		if len(list.Items) != 2 {
			t.Fatalf("got %d pod metrics, want 2", len(list.Items))
		}
		for _, tc := range []struct {
			pod      string
			cpuMilli int64
			mem      int64
		}{{"busy", 1500, 1 << 20}, {"idle", 0, 2 << 20}} {
			var m *metricsv1beta1.PodMetrics
			for i := range list.Items {
				if list.Items[i].Name == tc.pod {
					m = &list.Items[i]
				}
			}
			if m == nil || len(m.Containers) != 1 {
				t.Fatalf("%s: got %+v", tc.pod, m)
			}
			if got := m.Containers[0].Usage.Cpu().MilliValue(); got != tc.cpuMilli {
				t.Errorf("%s cpu: got %dm, want %dm", tc.pod, got, tc.cpuMilli)
			}
			if got := m.Containers[0].Usage.Memory().Value(); got != tc.mem {
				t.Errorf("%s memory: got %d, want %d", tc.pod, got, tc.mem)
			}
			if m.Timestamp.IsZero() || m.Window.Duration != 10*time.Second {
				t.Errorf("%s: got timestamp %v window %v", tc.pod, m.Timestamp, m.Window)
			}
		}
		cancel()
	})
}

func TestRESTSelectAndNotFound(t *testing.T) {
	nodes, pods := listers(t)
	store := &Store{}
	t0 := time.Unix(1000, 0)
	agent := &fakeNode{start: t0}
	for _, at := range []time.Time{t0, t0.Add(15 * time.Second)} {
		s, _ := agent.fetch(context.Background(), nil)
		s.Node.Time = at
		for i := range s.Pods {
			s.Pods[i].Time = at
			s.Pods[i].Containers[0].Time = at
		}
		store.Add("n1", s)
	}
	podREST, nodeREST := NewPodREST(store, pods), NewNodeREST(store, nodes)
	ctx := genericapirequest.WithNamespace(context.Background(), "default")
	sel, _ := labels.Parse("app=spin")
	obj, err := podREST.List(genericapirequest.WithNamespace(context.Background(), ""), &metainternalversion.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if items := obj.(*metricsv1beta1.PodMetricsList).Items; len(items) != 1 || items[0].Name != "busy" || items[0].Labels["app"] != "spin" {
		t.Errorf("label-selected list: got %+v, want busy with its labels", items)
	}
	if obj, err := podREST.Get(ctx, "busy", &metav1.GetOptions{}); err != nil || obj.(*metricsv1beta1.PodMetrics).Namespace != "default" {
		t.Errorf("get busy: got %v, %v", obj, err)
	}
	if _, err := podREST.Get(ctx, "idle", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get idle in the wrong namespace: got %v, want NotFound", err)
	}
	if obj, err := nodeREST.Get(ctx, "n1", &metav1.GetOptions{}); err != nil || obj.(*metricsv1beta1.NodeMetrics).Labels["zone"] != "a" {
		t.Errorf("get n1: got %v, %v", obj, err)
	}
	if _, err := nodeREST.Get(ctx, "n2", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get n2: got %v, want NotFound", err)
	}
	// A container whose counter went back (it restarted) has no rate.
	s, _ := agent.fetch(context.Background(), nil)
	for i := range s.Pods {
		s.Pods[i].Containers[0].CPUSeconds = 0
		s.Pods[i].Containers[0].Time = t0.Add(30 * time.Second)
	}
	store.Add("n1", s)
	for _, m := range store.Pods("default") {
		t.Errorf("got metrics %+v for a restarted container, want none", m)
	}
}

// addPair stores two samples of node, 10 s apart, in which the pod
// default/busy uses cores.
func addPair(store *Store, node string, cores float64) {
	t0 := time.Unix(1000, 0)
	for i, at := range []time.Time{t0, t0.Add(10 * time.Second)} {
		u := resourcemetrics.Usage{CPUSeconds: float64(i) * 10 * cores, MemoryBytes: 1 << 20, Time: at}
		store.Add(node, resourcemetrics.Sample{Node: u, Pods: []resourcemetrics.Pod{
			{Namespace: "default", Name: "busy", Usage: u, Containers: []resourcemetrics.Container{{Name: "spin", Usage: u}}},
		}})
	}
}

// TestStalePodMetrics pins a bug: a pod recreated on another node under
// its old name was listed twice (and got at random), once with the old
// node's figures, and a deleted pod's figures were still got.
func TestStalePodMetrics(t *testing.T) {
	_, pods := listers(t)
	store := &Store{}
	addPair(store, "n0", 1) // an earlier default/busy, on a node no longer scraped
	addPair(store, "n1", 0.25)
	podREST := NewPodREST(store, pods)
	ctx := genericapirequest.WithNamespace(context.Background(), "default")
	obj, err := podREST.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items := obj.(*metricsv1beta1.PodMetricsList).Items
	if len(items) != 1 || items[0].Containers[0].Usage.Cpu().MilliValue() != 250 {
		t.Errorf("list: got %+v, want busy once at 250m", items)
	}
	for range 10 { // the map's order is random; n0's must never win
		obj, err := podREST.Get(ctx, "busy", &metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := obj.(*metricsv1beta1.PodMetrics).Containers[0].Usage.Cpu().MilliValue(); got != 250 {
			t.Fatalf("get busy: got %dm, want 250m from the node it is bound to", got)
		}
	}
	gone := NewPodREST(store, corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})))
	if _, err := gone.Get(ctx, "busy", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get a deleted pod: got %v, want NotFound", err)
	}
}

// TestUnreachableNodeForgotten pins a bug: a node whose agent stopped
// answering kept being served with its last figures.
func TestUnreachableNodeForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes, _ := listers(t)
		agent := &fakeNode{start: time.Now()}
		// The scraper reads it on its own goroutine.
		var down atomic.Bool
		fetch := func(ctx context.Context, n *corev1.Node) (resourcemetrics.Sample, error) {
			if down.Load() {
				return resourcemetrics.Sample{}, errors.New("connection refused")
			}
			return agent.fetch(ctx, n)
		}
		store := &Store{}
		s := &Scraper{Nodes: nodes, Fetch: fetch, Store: store, Interval: 10 * time.Second}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if _, ok := store.Node("n1"); !ok {
			t.Fatal("got no node metrics after two scrapes")
		}
		down.Store(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if m, ok := store.Node("n1"); ok {
			t.Errorf("got %+v for a node that did not answer, want none", m)
		}
		if p := store.Pods(""); len(p) != 0 {
			t.Errorf("got %d pod metrics from a node that did not answer, want none", len(p))
		}
		cancel()
	})
}
