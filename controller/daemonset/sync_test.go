package daemonset

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

const dsKey = "ns/ds"

// stale is a controller whose informers never run: its caches hold what
// the test put there, as a controller sees them before the watch events
// of its own writes arrive. Syncs are called directly.
type stale struct {
	c       *Controller
	client  *fake.Clientset
	factory informers.SharedInformerFactory
}

func newStale(t *testing.T, objs ...runtime.Object) *stale {
	t.Helper()
	return newStaleAt(t, nil, objs...)
}

// newStaleAt is newStale with the controller's clock at clk (nil: real).
func newStaleAt(t *testing.T, clk clock.PassiveClock, objs ...runtime.Object) *stale {
	t.Helper()
	client := fake.NewClientset(objs...)
	nameGenerator(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, record.NewFakeRecorder(1000), Options{Clock: clk})
	apps, core := factory.Apps().V1(), factory.Core().V1()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			err = apps.DaemonSets().Informer().GetIndexer().Add(o)
		case *corev1.Node:
			err = core.Nodes().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = core.Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &stale{c: c, client: client, factory: factory}
}

func (s *stale) sync(t *testing.T) error {
	t.Helper()
	return s.c.sync(t.Context(), dsKey)
}

// podCreates counts the Pod creates the controller sent per Node.
func (s *stale) podCreates() map[string]int {
	out := map[string]int{}
	for _, a := range s.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			out[targetNode(a.(clienttesting.CreateAction).GetObject().(*corev1.Pod))]++
		}
	}
	return out
}

// failNthPodCreate makes the API server refuse the nth Pod create.
func failNthPodCreate(client *fake.Clientset, n int32) {
	var count atomic.Int32
	client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if count.Add(1) == n {
			return true, nil, errors.New("refused")
		}
		return false, nil, nil
	})
}

func failAllPodCreates(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused")
	})
}

// Regression: apply expected its creations and then its deletions, and
// setting the deletions cleared the creations, so a sync before the
// informer showed the new Pods created a second Pod on each Node.
func TestSyncBeforeCacheCatchesUpCreatesNoSecondPod(t *testing.T) {
	s := newStale(t, mkDS(), mkNode("n1"), mkNode("n2"))
	for range 2 {
		if err := s.sync(t); err != nil {
			t.Fatal(err)
		}
	}
	for node, n := range s.podCreates() {
		if n != 1 {
			t.Errorf("node %s: got %d pods created, want 1", node, n)
		}
	}
}

// Regression: a failed create was taken off the expectations twice, so
// the informer showing one of the Pods that were made satisfied them
// while another was still unseen, and the next sync made that one again.
func TestFailedCreateLowersExpectationsOnce(t *testing.T) {
	s := newStale(t, mkDS(), mkNode("n1"), mkNode("n2"), mkNode("n3"))
	failNthPodCreate(s.client, 2)
	if err := s.sync(t); err == nil {
		t.Fatalf("sync with a refused create: got no error, want one")
	}
	if adds, _ := s.c.exp.Pending(dsKey); adds != 2 {
		t.Fatalf("creations still expected: got %d, want 2 (two pods made, not yet seen)", adds)
	}
	// The informer shows the first Pod made.
	list, err := s.client.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("pods after the first sync: got %d (%v), want 2", len(list.Items), err)
	}
	first := &list.Items[0]
	if err := s.factory.Core().V1().Pods().Informer().GetIndexer().Add(first); err != nil {
		t.Fatal(err)
	}
	s.c.podEvents.OnAdd(first)
	if err := s.sync(t); err != nil {
		t.Fatal(err)
	}
	// One Pod made is still unseen: the second sync must wait for it,
	// not create Pods for the Nodes its cache shows empty.
	total := 0
	for _, n := range s.podCreates() {
		total += n
	}
	if total != 3 {
		t.Fatalf("pod creates after the second sync: got %d, want the first sync's 3", total)
	}
}

// Regression: sync read the expectations after listing the Pods, so a
// Pod whose add event landed in between was missing from the list yet
// counted as seen, and the sync created a second Pod on its Node.
func TestExpectationsReadBeforePods(t *testing.T) {
	s := newStale(t, mkDS(), mkNode("n1"))
	s.c.exp.Expect(dsKey, 1, nil) // n1's Pod, made by an earlier sync
	// The Pod's add event lands just after the sync read the cache.
	podsOf := s.c.podsOf
	s.c.podsOf = func(ns string, uid types.UID) ([]*corev1.Pod, error) {
		pods, err := podsOf(ns, uid)
		s.c.exp.CreationObserved(dsKey)
		return pods, err
	}
	if err := s.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := s.podCreates(); len(got) != 0 {
		t.Fatalf("pod creates: got %v, want none", got)
	}
}

// Regression: a sync whose Pod creates failed returned at once, leaving
// the status (and history) unwritten until a sync succeeded.
func TestFailedCreateStillWritesStatus(t *testing.T) {
	s := newStale(t, mkDS(), mkNode("n1"))
	failAllPodCreates(s.client)
	if err := s.sync(t); err == nil {
		t.Fatalf("sync with refused creates: got no error, want one")
	}
	ds, err := s.client.AppsV1().DaemonSets("ns").Get(t.Context(), "ds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Status.DesiredNumberScheduled != 1 || ds.Status.ObservedGeneration != 1 {
		t.Fatalf("status: got desired %d, observed generation %d, want 1, 1",
			ds.Status.DesiredNumberScheduled, ds.Status.ObservedGeneration)
	}
}

// The controller tells availability by its clock: a Pod Ready since t0
// is not available 30s later when minReadySeconds is 60.
func TestStatusUsesControllerClock(t *testing.T) {
	ds := mkDS(func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 60 })
	pod := mkPod("p", "n1", "h", 0, ready)
	s := newStaleAt(t, testclock.NewFakePassiveClock(t0.Add(30*time.Second)), ds, mkNode("n1"), pod)
	if err := s.sync(t); err != nil {
		t.Fatal(err)
	}
	got, err := s.client.AppsV1().DaemonSets("ns").Get(t.Context(), "ds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NumberReady != 1 || got.Status.NumberAvailable != 0 {
		t.Fatalf("status: got ready %d, available %d, want 1, 0", got.Status.NumberReady, got.Status.NumberAvailable)
	}
}
