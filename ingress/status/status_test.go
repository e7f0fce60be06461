package status

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// ingress is an Ingress in namespace ns of class, showing addrs.
func ingress(name, class string, addrs ...string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: networkingv1.IngressSpec{IngressClassName: &class}}
	ing.Status.LoadBalancer.Ingress = StaticAddresses(addrs)
	return ing
}

// ours serves the Ingresses of class portal.
func ours(ing *networkingv1.Ingress) bool {
	return ing.Spec.IngressClassName != nil && *ing.Spec.IngressClassName == "portal"
}

func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

func external(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

func lbService(name string, ips ...string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return svc
}

// harness runs an Updater on a fake clientset with real informers, in a
// synctest bubble.
type harness struct {
	t      *testing.T
	client *fake.Clientset
	resync chan struct{}
}

func run(t *testing.T, o Options, objs []runtime.Object, check func(h *harness)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(objs...)
		factory := informers.NewSharedInformerFactory(client, 0)
		h := &harness{t: t, client: client, resync: make(chan struct{})}
		o.Ours, o.Resync = ours, h.resync
		u := New(client, factory, o)
		ctx, cancel := context.WithCancel(t.Context())
		factory.Start(ctx.Done())
		done := make(chan error)
		go func() { done <- u.Run(ctx) }()
		h.settle()
		check(h)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
}

func (h *harness) settle() {
	time.Sleep(time.Second)
	synctest.Wait()
}

// want checks the addresses Ingress name shows.
func (h *harness) want(name string, addrs ...string) {
	h.t.Helper()
	ing, err := h.client.NetworkingV1().Ingresses("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if got := show(ing.Status.LoadBalancer.Ingress); got != show(StaticAddresses(addrs)) {
		h.t.Errorf("%s: got addresses %q, want %q", name, got, show(StaticAddresses(addrs)))
	}
}

// statusWrites counts the Ingress status updates sent so far.
func (h *harness) statusWrites() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "ingresses" {
			n++
		}
	}
	return n
}

func TestPublishStatusAddress(t *testing.T) {
	objs := []runtime.Object{
		ingress("web", "portal"),
		ingress("api", "portal", "203.0.113.9"),
		ingress("other", "nginx", "198.51.100.1"),
	}
	o := Options{PublishStatusAddress: []string{"lb.example.com", "192.0.2.1", " 2001:db8::1"}}
	run(t, o, objs, func(h *harness) {
		h.want("web", "192.0.2.1", "2001:db8::1", "lb.example.com")
		h.want("api", "192.0.2.1", "2001:db8::1", "lb.example.com")
		// Another class's Ingress is not ours to write.
		h.want("other", "198.51.100.1")
	})
}

func TestWritesOnlyWhenDifferent(t *testing.T) {
	objs := []runtime.Object{ingress("web", "portal", "2001:db8::1", "192.0.2.1")}
	run(t, Options{PublishStatusAddress: []string{"192.0.2.1", "2001:db8::1"}}, objs, func(h *harness) {
		if n := h.statusWrites(); n != 0 {
			h.t.Errorf("got %d status writes for an Ingress already showing the addresses, want 0", n)
		}
		// A resync (the Watcher changed) checks again and still writes nothing.
		h.resync <- struct{}{}
		h.settle()
		if n := h.statusWrites(); n != 0 {
			h.t.Errorf("after resync: got %d status writes, want 0", n)
		}
	})
}

func TestPublishService(t *testing.T) {
	o := Options{PublishService: "ingress/portal", NodeName: "n1"}
	objs := []runtime.Object{ingress("web", "portal", "198.51.100.7"), node("n1", internal("10.0.0.1"))}
	run(t, o, objs, func(h *harness) {
		// The Service does not exist yet: the status is left as it is.
		h.want("web", "198.51.100.7")
		ctx := context.Background()
		svc := lbService("portal")
		svc.Spec.ExternalIPs = []string{"192.0.2.50"}
		if _, err := h.client.CoreV1().Services("ingress").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		h.settle()
		h.want("web", "192.0.2.50")
		// Its load balancer's addresses win over its external IPs.
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
		if _, err := h.client.CoreV1().Services("ingress").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		h.settle()
		h.want("web", "192.0.2.10")
	})
}

func TestNodeAddressesFollowTheNode(t *testing.T) {
	objs := []runtime.Object{ingress("web", "portal"), node("n1", internal("10.0.0.1"), internal("fd00::1"))}
	run(t, Options{NodeName: "n1"}, objs, func(h *harness) {
		h.want("web", "10.0.0.1", "fd00::1")
		ctx := context.Background()
		n, _ := h.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		n.Status.Addresses = append(n.Status.Addresses, external("203.0.113.4"))
		if _, err := h.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		h.settle()
		h.want("web", "203.0.113.4")
		// A heartbeat (no address change) writes nothing.
		writes := h.statusWrites()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if _, err := h.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		h.settle()
		if got := h.statusWrites(); got != writes {
			h.t.Errorf("heartbeat caused %d status writes, want 0", got-writes)
		}
	})
}

// An Ingress that becomes ours gets the address; one that stops being
// ours keeps what it shows (another controller may own it now).
func TestClassChange(t *testing.T) {
	objs := []runtime.Object{ingress("a", "nginx"), ingress("b", "portal")}
	run(t, Options{PublishStatusAddress: []string{"192.0.2.1"}}, objs, func(h *harness) {
		h.want("a")
		h.want("b", "192.0.2.1")
		ctx := context.Background()
		for name, class := range map[string]string{"a": "portal", "b": "nginx"} {
			ing, _ := h.client.NetworkingV1().Ingresses("ns").Get(ctx, name, metav1.GetOptions{})
			ing.Spec.IngressClassName = &class
			if _, err := h.client.NetworkingV1().Ingresses("ns").Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
				h.t.Fatal(err)
			}
		}
		h.settle()
		h.want("a", "192.0.2.1")
		h.want("b", "192.0.2.1")
	})
}

func TestRetriesOnConflict(t *testing.T) {
	objs := []runtime.Object{ingress("web", "portal")}
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(objs...)
		conflicts := 2
		client.PrependReactor("update", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "status" || conflicts == 0 {
				return false, nil, nil
			}
			conflicts--
			return true, nil, apierrors.NewConflict(networkingv1.Resource("ingresses"), "web", nil)
		})
		factory := informers.NewSharedInformerFactory(client, 0)
		u := New(client, factory, Options{Ours: ours, PublishStatusAddress: []string{"192.0.2.1"}})
		ctx, cancel := context.WithCancel(t.Context())
		factory.Start(ctx.Done())
		done := make(chan error)
		go func() { done <- u.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		h := &harness{t: t, client: client}
		h.want("web", "192.0.2.1")
		if gets := slices.IndexFunc(client.Actions(), func(a k8stesting.Action) bool { return a.GetVerb() == "get" }); gets < 0 {
			t.Error("no fresh get after a conflict")
		}
		cancel()
		<-done
		factory.Shutdown()
	})
}

func TestAddressSources(t *testing.T) {
	externalName := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "lb.example.com"}}
	hostnameLB := lbService("x")
	hostnameLB.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "elb.example.com"}, {IP: "192.0.2.9"}}
	pending := lbService("y")
	pending.Spec.ExternalIPs = []string{"192.0.2.20", "192.0.2.3"}
	tests := []struct {
		name string
		got  []networkingv1.IngressLoadBalancerIngress
		want string
	}{
		{"ExternalName Service", ServiceAddresses(externalName), "lb.example.com"},
		{"load balancer IPs and names", ServiceAddresses(hostnameLB), "elb.example.com,192.0.2.9"},
		{"external IPs while pending", ServiceAddresses(pending), "192.0.2.20,192.0.2.3"},
		{"no address at all", ServiceAddresses(lbService("z")), ""},
		{"node internal only", NodeAddresses(node("n", internal("10.0.0.2"), internal("10.0.0.1"))), "10.0.0.1,10.0.0.2"},
		{"node external wins", NodeAddresses(node("n", internal("10.0.0.2"), external("203.0.113.1"))), "203.0.113.1"},
		// Written as servicelb gives the node's address to Services.
		{"node address as servicelb shows it", NodeAddresses(node("n", internal("::ffff:10.0.0.3"))), "10.0.0.3"},
		{"node hostname ignored", NodeAddresses(node("n", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n"})), ""},
		{"static with blanks and duplicates", StaticAddresses([]string{"192.0.2.1", "", "192.0.2.1", "a.example"}), "a.example,192.0.2.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := show(tc.got); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
