package endpoints

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
)

// harness runs a Controller on real informers over a fake clientset. It
// must be built inside a synctest bubble, whose fake clock lets settle
// wait for "every event handled, every sync finished" in no real time.
type harness struct {
	t      *testing.T
	client *fake.Clientset
	ctx    context.Context
	ctrl   *Controller
}

func start(t *testing.T, objs ...runtime.Object) *harness {
	return startWith(t, Options{}, objs...)
}

func startWith(t *testing.T, opts Options, objs ...runtime.Object) *harness {
	return startWithClient(t, fake.NewClientset(objs...), opts)
}

func startWithClient(t *testing.T, client *fake.Clientset, opts Options) *harness {
	factory := informers.NewSharedInformerFactory(client, 0)
	c := New(client, factory, opts)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, 2)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done // Run returns only after its workers stopped
		factory.Shutdown()
	})
	h := &harness{t: t, client: client, ctx: ctx, ctrl: c}
	h.settle()
	return h
}

// settle lets the bubble's clock run until every timer due in the next
// few seconds (cache-sync polls, worker restarts, retry backoffs) has
// fired and every goroutine is blocked again. The clock is synctest's,
// so this takes no real time.
func (h *harness) settle() {
	for range 5 {
		time.Sleep(time.Second)
		synctest.Wait()
	}
}

func (h *harness) endpoints(ns, name string) *corev1.Endpoints {
	h.t.Helper()
	ep, err := h.client.CoreV1().Endpoints(ns).Get(h.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatalf("get endpoints %s/%s: %v", ns, name, err)
	}
	return ep
}

// writes counts the Endpoints writes the controller has made so far.
func (h *harness) writes() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetResource().Resource == "endpoints" && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			n++
		}
	}
	return n
}

func TestControllerWritesEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		created := func(s *corev1.Service) { s.CreationTimestamp = metav1.Now() } // the API server sets it
		h := start(t,
			service("web", created),
			pod("a", "web", []string{"10.0.0.1"}),
			pod("b", "web", []string{"10.0.0.2"}, notReady),
			pod("done", "web", []string{"10.0.0.3"}, phase(corev1.PodSucceeded)),
			pod("going", "web", []string{"10.0.0.4"}, terminating),
			pod("other", "db", []string{"10.0.0.5"}),
		)
		ep := h.endpoints("ns", "web")
		if ep == nil {
			t.Fatal("got no Endpoints ns/web, want one")
		}
		want := "[http:8080/TCP] ready=10.0.0.1(a@node-1) notReady=10.0.0.2(b@node-1)"
		if got := render(ep.Subsets); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		if ep.Labels["team"] != "a" {
			t.Errorf("got labels %v, want the service's team=a", ep.Labels)
		}
		if _, ok := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
			t.Errorf("got annotations %v, want %s", ep.Annotations, corev1.EndpointsLastChangeTriggerTime)
		}
		if !CreatedByController(ep) {
			t.Errorf("got managedFields %v, want an entry by %s", ep.ManagedFields, FieldManager)
		}
	})
}

// TestControllerBatchesPodChanges pins BatchPeriod: a pod change after a
// quiet spell is written at once, one that follows a sync closely waits
// until the period has passed.
func TestControllerBatchesPodChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = time.Second
		h := startWith(t, Options{BatchPeriod: period}, service("web"),
			pod("a", "web", []string{"10.0.0.1"}, notReady), pod("b", "web", []string{"10.0.0.2"}, notReady))
		ready := func(name string) {
			p, _ := h.client.CoreV1().Pods("ns").Get(h.ctx, name, metav1.GetOptions{})
			p.Status.Conditions[0].Status = corev1.ConditionTrue
			if _, err := h.client.CoreV1().Pods("ns").UpdateStatus(h.ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		before := h.writes()
		ready("a")
		if got := h.writes() - before; got != 1 {
			t.Errorf("writes at once after the first change: got %d, want 1", got)
		}
		ready("b")
		if got := h.writes() - before; got != 1 {
			t.Errorf("writes at once after a second change: got %d, want still 1", got)
		}
		time.Sleep(period)
		synctest.Wait()
		if got := h.writes() - before; got != 2 {
			t.Errorf("writes a period after the first change: got %d, want 2", got)
		}
		want := "[http:8080/TCP] ready=10.0.0.1(a@node-1),10.0.0.2(b@node-1) notReady="
		if got := render(h.endpoints("ns", "web").Subsets); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}

// TestControllerSkipsPodsWithoutAddress: a pod created and scheduled
// before it has an address is in no Endpoints, so neither step costs a
// sync of its Service; the address does.
func TestControllerSkipsPodsWithoutAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, service("web"), pod("a", "web", []string{"10.0.0.1"}))
		syncs := func() uint64 {
			n, err := testutil.GetHistogramMetricCount(h.ctrl.metrics.syncDuration)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := syncs()
		b := pod("b", "web", nil, func(p *corev1.Pod) { p.Spec.NodeName = "" })
		b, err := h.client.CoreV1().Pods("ns").Create(h.ctx, b, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h.settle()
		b.Spec.NodeName = "node-1"
		if b, err = h.client.CoreV1().Pods("ns").Update(h.ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if got := syncs() - before; got != 0 {
			t.Errorf("syncs after creating and scheduling a pod without an address: got %d, want 0", got)
		}
		b.Status.PodIP, b.Status.PodIPs = "10.0.0.2", []corev1.PodIP{{IP: "10.0.0.2"}}
		if _, err := h.client.CoreV1().Pods("ns").UpdateStatus(h.ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		// The fake leaves resourceVersion empty, so the event of the
		// controller's own write is synced as an edit too.
		if got := syncs() - before; got == 0 {
			t.Errorf("syncs after the pod got its address: got 0, want some")
		}
		want := "[http:8080/TCP] ready=10.0.0.1(a@node-1),10.0.0.2(b@node-1) notReady="
		if got := render(h.endpoints("ns", "web").Subsets); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}

// TestControllerOwnWriteIsNoEdit: the event of the controller's own write
// of an Endpoints costs no second sync, while someone else's edit of it is
// undone.
func TestControllerOwnWriteIsNoEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(service("web"), pod("a", "web", []string{"10.0.0.1"}, notReady))
		// The fake leaves resourceVersion empty; the API server does not.
		var rv atomic.Int64
		client.PrependReactor("*", "endpoints", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if o, ok := a.(clienttesting.CreateAction); ok && (a.GetVerb() == "create" || a.GetVerb() == "update") {
				o.GetObject().(*corev1.Endpoints).ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
			}
			return false, nil, nil
		})
		h := startWithClient(t, client, Options{})
		syncs := func() uint64 {
			n, err := testutil.GetHistogramMetricCount(h.ctrl.metrics.syncDuration)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := syncs()
		p, _ := h.client.CoreV1().Pods("ns").Get(h.ctx, "a", metav1.GetOptions{})
		p.Status.Conditions[0].Status = corev1.ConditionTrue
		if _, err := h.client.CoreV1().Pods("ns").UpdateStatus(h.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if got := syncs() - before; got != 1 {
			t.Errorf("syncs after one pod change and its write: got %d, want 1", got)
		}
		ep := h.endpoints("ns", "web")
		ep.Subsets = nil
		if _, err := h.client.CoreV1().Endpoints("ns").Update(h.ctx, ep, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		want := "[http:8080/TCP] ready=10.0.0.1(a@node-1) notReady="
		if got := render(h.endpoints("ns", "web").Subsets); got != want {
			t.Errorf("after someone emptied the Endpoints: got %s, want %s", got, want)
		}
	})
}

func TestControllerFollowsPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, service("web"), pod("a", "web", []string{"10.0.0.1"}, notReady))
		p, _ := h.client.CoreV1().Pods("ns").Get(h.ctx, "a", metav1.GetOptions{})
		p.Status.Conditions[0].Status = corev1.ConditionTrue
		if _, err := h.client.CoreV1().Pods("ns").UpdateStatus(h.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		want := "[http:8080/TCP] ready=10.0.0.1(a@node-1) notReady="
		if got := render(h.endpoints("ns", "web").Subsets); got != want {
			t.Errorf("after the pod turned ready: got %s, want %s", got, want)
		}

		p.Labels = map[string]string{"app": "elsewhere"}
		if _, err := h.client.CoreV1().Pods("ns").Update(h.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if got := render(h.endpoints("ns", "web").Subsets); got != "" {
			t.Errorf("after the pod's labels changed: got %s, want no subsets", got)
		}
	})
}

func TestControllerNoWriteWhenNothingChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, service("web"), pod("a", "web", []string{"10.0.0.1"}))
		before := h.writes()
		if before != 1 {
			t.Fatalf("got %d writes to converge, want 1 create", before)
		}
		// A pod change no Endpoints shows, and a Service change that
		// triggers a sync but changes nothing the Endpoints carry.
		p, _ := h.client.CoreV1().Pods("ns").Get(h.ctx, "a", metav1.GetOptions{})
		p.Annotations = map[string]string{"touched": "yes"}
		_, _ = h.client.CoreV1().Pods("ns").Update(h.ctx, p, metav1.UpdateOptions{})
		s, _ := h.client.CoreV1().Services("ns").Get(h.ctx, "web", metav1.GetOptions{})
		s.Annotations = map[string]string{"touched": "yes"}
		_, _ = h.client.CoreV1().Services("ns").Update(h.ctx, s, metav1.UpdateOptions{})
		h.settle()
		if got := h.writes(); got != before {
			t.Errorf("got %d Endpoints writes after no-op changes, want %d", got, before)
		}
	})
}

func TestControllerDeletesOnlyItsOwnEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		userEndpoints := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "external"},
			Subsets: []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}},
				Ports:     []corev1.EndpointPort{{Port: 443, Protocol: corev1.ProtocolTCP}},
			}},
		}
		h := start(t, service("web"), pod("a", "web", []string{"10.0.0.1"}),
			service("external", withoutSelector), userEndpoints)
		if h.endpoints("ns", "web") == nil {
			t.Fatal("got no Endpoints ns/web, want one")
		}
		for _, name := range []string{"web", "external"} {
			if err := h.client.CoreV1().Services("ns").Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		h.settle()
		if ep := h.endpoints("ns", "web"); ep != nil {
			t.Errorf("got Endpoints ns/web after its Service was deleted, want none")
		}
		if ep := h.endpoints("ns", "external"); ep == nil {
			t.Errorf("got no Endpoints ns/external, want the user's Endpoints kept")
		}
	})
}

func TestControllerCleansUpLeftoversAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ours := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate}}}}
		theirs := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "manual"}}
		h := start(t, ours, theirs)
		if h.endpoints("ns", "gone") != nil {
			t.Errorf("got leftover Endpoints ns/gone, want it deleted")
		}
		if h.endpoints("ns", "manual") == nil {
			t.Errorf("got no Endpoints ns/manual, want it kept")
		}
	})
}

func TestControllerLeavesDefaultKubernetesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Even a kubernetes Service with a selector (which the API server
		// never creates) must not make the controller write the Endpoints.
		svc := service("kubernetes", func(s *corev1.Service) { s.Namespace = metav1.NamespaceDefault })
		kube := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "kubernetes"},
			Subsets: []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}},
				Ports:     []corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP}},
			}}}
		h := start(t, svc, kube)
		if got := h.writes(); got != 0 {
			t.Errorf("got %d writes to default/kubernetes, want 0", got)
		}
	})
}

func TestControllerTruncatesOverCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		objs := []runtime.Object{service("web")}
		for _, p := range manyPods("p", 1, MaxCapacity+1) {
			objs = append(objs, p)
		}
		h := start(t, objs...)
		ep := h.endpoints("ns", "web")
		if ep == nil {
			t.Fatal("got no Endpoints, want one")
		}
		if n, _ := countAddresses(ep.Subsets); n != MaxCapacity {
			t.Errorf("got %d addresses, want %d", n, MaxCapacity)
		}
		if got := ep.Annotations[corev1.EndpointsOverCapacity]; got != "truncated" {
			t.Errorf("got over-capacity annotation %q, want %q", got, "truncated")
		}
	})
}

func TestControllerCountsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, service("web"), pod("a", "web", []string{"10.0.0.1"}))
		if got, _ := testutil.GetCounterMetricValue(h.ctrl.metrics.changes.WithLabelValues("create")); got != 1 {
			t.Errorf("got %v creates counted, want 1", got)
		}
	})
}
