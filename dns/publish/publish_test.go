package publish

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func opts(id string) Options {
	return Options{ServiceIP: netip.MustParseAddr("10.96.0.10"), Address: netip.MustParseAddr("10.100.0.1"),
		Port: 53, Identity: id, NodeName: id}
}

func TestPublishCreatesServiceSliceAndLease(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	if err := New(c, opts("node1")).sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	svc, err := c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.96.0.10" || len(svc.Spec.Ports) != 2 || len(svc.Spec.Selector) != 0 {
		t.Errorf("kube-dns Service: got %+v, want 10.96.0.10, dns and dns-tcp, no selector", svc.Spec)
	}
	s, err := c.DiscoveryV1().EndpointSlices("kube-system").Get(ctx, "kube-dns-node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels[discoveryv1.LabelServiceName] != "kube-dns" || s.Endpoints[0].Addresses[0] != "10.100.0.1" ||
		!*s.Endpoints[0].Conditions.Ready {
		t.Errorf("slice: got %+v, want a ready 10.100.0.1 endpoint of kube-dns", s)
	}
	if _, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-dns-node1", metav1.GetOptions{}); err != nil {
		t.Errorf("lease: %v", err)
	}
}

func TestPublishRemovesDeadServers(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	dead := New(c, opts("dead"))
	alive := New(c, opts("alive"))
	if err := dead.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := alive.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	// dead stops renewing: its Lease is a minute old.
	l, _ := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-dns-dead", metav1.GetOptions{})
	old := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	l.Spec.RenewTime = &old
	c.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
	if err := alive.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	list, _ := c.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 || list.Items[0].Name != "kube-dns-alive" {
		t.Errorf("slices after the dead server's Lease expired: got %d (%v), want only kube-dns-alive", len(list.Items), list.Items)
	}
}

// A server that turns ready while a round is under way must be published
// as ready within the fast retry, not a whole Lease tick later: until
// then the kube-dns Service has no ready endpoint and every pod's lookups
// fail.
func TestPublishTurnsReadyWithoutWaitingForTheLeaseTick(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientset()
	o := opts("node1")
	o.LeaseDuration = time.Hour
	var calls atomic.Int32
	o.Ready = func() bool { return calls.Add(1) > 1 } // ready from the second look on
	done := make(chan struct{})
	go func() { New(c, o).Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := c.DiscoveryV1().EndpointSlices("kube-system").Get(ctx, "kube-dns-node1", metav1.GetOptions{})
		if err == nil && *s.Endpoints[0].Conditions.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint is still not ready 10 s after the server turned ready (err %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestPublishLeavesASelectedServiceAlone(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"}}})
	if err := New(c, opts("node1")).sync(ctx, true); err != errForeignService {
		t.Fatalf("got %v, want errForeignService", err)
	}
	list, _ := c.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Errorf("published %d slices into a Service that selects pods", len(list.Items))
	}
}

func TestExpired(t *testing.T) {
	now := time.Now()
	l := func(age time.Duration) *coordinationv1.Lease {
		rt := metav1.NewMicroTime(now.Add(-age))
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &rt, LeaseDurationSeconds: ptr.To[int32](40)}}
	}
	if expired(l(10*time.Second), now) || !expired(l(41*time.Second), now) || !expired(&coordinationv1.Lease{}, now) {
		t.Error("expired: want false for a 10s-old renewal, true for 41s and for no renewal")
	}
}
