package servicelb

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// svcOpt changes a test Service.
type svcOpt func(*corev1.Service)

// lbService is a single-stack IPv4 LoadBalancer Service created at minute
// age of the test epoch.
func lbService(name string, age int, opts ...svcOpt) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Date(2025, 1, 1, 0, age, 0, 0, time.UTC)),
		},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{v4}},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func families(f ...corev1.IPFamily) svcOpt {
	return func(s *corev1.Service) { s.Spec.IPFamilies = f }
}

func class(c string) svcOpt { return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &c } }

func loadBalancerIP(ip string) svcOpt { return func(s *corev1.Service) { s.Spec.LoadBalancerIP = ip } }

func annotationIPs(v string) svcOpt {
	return func(s *corev1.Service) { s.Annotations = map[string]string{AnnotationIPs: v} }
}

func status(ips ...string) svcOpt {
	return func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = ingressFor(addrs(ips...)) }
}

// harness runs a Controller on a fake clientset with real informers.
type harness struct {
	t        *testing.T
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

// runController starts the controller over objs inside a synctest
// bubble, lets it settle, calls check and stops everything.
func runController(t *testing.T, pools string, objs []*corev1.Service, check func(h *harness)) {
	t.Helper()
	rt := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		rt = append(rt, o)
	}
	runWith(t, pools, rt, check)
}

// runWith is runController over any objects (Services and Nodes).
func runWith(t *testing.T, pools string, rt []runtime.Object, check func(h *harness)) {
	t.Helper()
	runWithOptions(t, Options{Pools: mustPools(t, pools)}, rt, check)
}

// runWithOptions is runWith with any Options.
func runWithOptions(t *testing.T, o Options, rt []runtime.Object, check func(h *harness)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(rt...)
		factory := informers.NewSharedInformerFactory(client, 0)
		recorder := record.NewFakeRecorder(100)
		c, err := New(client, factory, recorder, o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		factory.Start(ctx.Done())
		done := make(chan struct{})
		go func() { c.Run(ctx, 2); close(done) }()
		h := &harness{t: t, client: client, recorder: recorder}
		h.settle()
		check(h)
		cancel()
		<-done
		factory.Shutdown()
	})
}

func (h *harness) settle() {
	time.Sleep(time.Second)
	synctest.Wait()
}

func (h *harness) get(name string) *corev1.Service {
	h.t.Helper()
	svc, err := h.client.CoreV1().Services("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("get service %s: %v", name, err)
	}
	return svc
}

// wantIngress checks the ingress of Service name, ipMode VIP included.
func (h *harness) wantIngress(name string, ips ...string) {
	h.t.Helper()
	svc := h.get(name)
	var got []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		got = append(got, ing.IP)
		if ing.IPMode == nil || *ing.IPMode != corev1.LoadBalancerIPModeVIP {
			h.t.Errorf("%s: ingress %s has ipMode %v, want VIP", name, ing.IP, ing.IPMode)
		}
	}
	if !slices.Equal(got, ips) {
		h.t.Errorf("%s: got ingress %v, want %v", name, got, ips)
	}
}

// wantCondition checks the ConditionAllocated of Service name; nil wants none.
func (h *harness) wantCondition(name string, status *metav1.ConditionStatus, reason string) {
	h.t.Helper()
	got := meta.FindStatusCondition(h.get(name).Status.Conditions, ConditionAllocated)
	switch {
	case status == nil && got != nil:
		h.t.Errorf("%s: got condition %+v, want none", name, *got)
	case status == nil:
	case got == nil:
		h.t.Errorf("%s: no condition, want %s %s", name, *status, reason)
	case got.Status != *status || got.Reason != reason:
		h.t.Errorf("%s: got condition %s %s (%s), want %s %s", name, got.Status, got.Reason, got.Message, *status, reason)
	}
}

// events drains the recorded events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) wantEvent(prefix string) {
	h.t.Helper()
	evs := h.events()
	if !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, prefix) }) {
		h.t.Errorf("got events %q, want one starting %q", evs, prefix)
	}
}

func (h *harness) update(name string, change func(*corev1.Service)) {
	h.t.Helper()
	svc := h.get(name)
	change(svc)
	if _, err := h.client.CoreV1().Services("ns").Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

func (h *harness) delete(name string) {
	h.t.Helper()
	if err := h.client.CoreV1().Services("ns").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

var (
	condTrue  = ptr(metav1.ConditionTrue)
	condFalse = ptr(metav1.ConditionFalse)
)

func TestControllerAssigns(t *testing.T) {
	svcs := []*corev1.Service{
		lbService("a", 0),
		lbService("dual", 1, families(v6, v4)),
		lbService("v6-only-pool-v4", 2, families(v4, v6)),
		lbService("classed", 3, class(Class)),
		lbService("requested", 4, loadBalancerIP("192.0.2.6")),
		lbService("annotated", 5, families(v4, v6), annotationIPs("2001:db8::9,192.0.2.5")),
	}
	runController(t, "192.0.2.0/29,2001:db8::/120", svcs, func(h *harness) {
		h.wantIngress("a", "192.0.2.1")
		h.wantCondition("a", condTrue, ReasonAllocated)
		h.wantIngress("dual", "2001:db8::", "192.0.2.2")
		h.wantIngress("v6-only-pool-v4", "192.0.2.3", "2001:db8::1")
		h.wantIngress("classed", "192.0.2.4")
		h.wantIngress("requested", "192.0.2.6")
		h.wantIngress("annotated", "192.0.2.5", "2001:db8::9")
		h.wantEvent("Normal IPAllocated")
	})
}

func TestControllerSingleFamilyPool(t *testing.T) {
	runController(t, "192.0.2.0/30", []*corev1.Service{lbService("dual", 0, families(v6, v4))}, func(h *harness) {
		h.wantIngress("dual", "192.0.2.1")
		h.wantCondition("dual", condTrue, ReasonAllocated)
	})
}

func TestControllerLeavesOtherClassesAlone(t *testing.T) {
	runController(t, "192.0.2.0/30", []*corev1.Service{lbService("other", 0, class("example.com/lb"))}, func(h *harness) {
		h.wantIngress("other")
		h.wantCondition("other", nil, "")
		if evs := h.events(); len(evs) != 0 {
			h.t.Errorf("got events %q, want none", evs)
		}
	})
}

func TestControllerRefusals(t *testing.T) {
	svcs := []*corev1.Service{
		lbService("holder", 0, loadBalancerIP("192.0.2.1")),
		lbService("taken", 1, loadBalancerIP("192.0.2.1")),
		lbService("outside", 2, loadBalancerIP("203.0.113.1")),
		lbService("garbled", 3, annotationIPs("not-an-ip")),
		lbService("v6", 4, families(v6)),
	}
	runController(t, "192.0.2.0/29", svcs, func(h *harness) {
		h.wantIngress("holder", "192.0.2.1")
		for name, reason := range map[string]string{
			"taken": ReasonIPInUse, "outside": ReasonNotInPool, "garbled": ReasonInvalidRequest, "v6": ReasonNoPool,
		} {
			h.wantIngress(name)
			h.wantCondition(name, condFalse, reason)
		}
		h.wantEvent("Warning AllocationFailed")
		// The holder goes: the waiting Service gets the address it asked for.
		h.delete("holder")
		h.wantIngress("taken", "192.0.2.1")
		h.wantCondition("taken", condTrue, ReasonAllocated)
	})
}

func TestControllerExhaustedPool(t *testing.T) {
	svcs := []*corev1.Service{lbService("first", 0), lbService("second", 1)}
	runController(t, "192.0.2.9/32", svcs, func(h *harness) {
		h.wantIngress("first", "192.0.2.9")
		h.wantIngress("second")
		h.wantCondition("second", condFalse, ReasonPoolExhausted)
		evs := h.events()
		warnings := slices.DeleteFunc(evs, func(e string) bool { return !strings.HasPrefix(e, "Warning AllocationFailed") })
		if len(warnings) != 1 || !strings.Contains(warnings[0], "exhausted") {
			h.t.Errorf("got warnings %q, want one AllocationFailed saying exhausted", warnings)
		}
		// Leaving type LoadBalancer frees the address and clears the status.
		h.update("first", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })
		h.wantIngress("first")
		h.wantCondition("first", nil, "")
		h.wantIngress("second", "192.0.2.9")
		h.wantCondition("second", condTrue, ReasonAllocated)
	})
}

func TestControllerRebuildsFromStatus(t *testing.T) {
	svcs := []*corev1.Service{
		lbService("new", 5),
		lbService("kept", 1, status("192.0.2.2")),
		lbService("younger-twin", 3, status("192.0.2.3")),
		lbService("older-twin", 2, status("192.0.2.3")),
		lbService("moved-pools", 4, status("203.0.113.7")),
	}
	runController(t, "192.0.2.0/29", svcs, func(h *harness) {
		h.wantIngress("kept", "192.0.2.2")
		h.wantIngress("older-twin", "192.0.2.3")
		// The others get the lowest free addresses, oldest first.
		h.wantIngress("younger-twin", "192.0.2.1")
		h.wantIngress("moved-pools", "192.0.2.4")
		h.wantIngress("new", "192.0.2.5")
	})
}

func TestControllerRequestChange(t *testing.T) {
	runController(t, "192.0.2.0/29", []*corev1.Service{lbService("a", 0), lbService("b", 1)}, func(h *harness) {
		h.wantIngress("a", "192.0.2.1")
		h.wantIngress("b", "192.0.2.2")
		// a asks for b's address: refused, a keeps its own.
		h.update("a", loadBalancerIP("192.0.2.2"))
		h.wantIngress("a", "192.0.2.1")
		h.wantCondition("a", condFalse, ReasonIPInUse)
		// a asks for a free one: it moves, and its old one is free again.
		h.update("a", loadBalancerIP("192.0.2.6"))
		h.wantIngress("a", "192.0.2.6")
		h.wantCondition("a", condTrue, ReasonAllocated)
		h.delete("b")
		h.update("a", loadBalancerIP(""))
		h.wantIngress("a", "192.0.2.6")
	})
}
