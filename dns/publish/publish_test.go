package publish

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
	if svc.Spec.ClusterIP != "10.96.0.10" || len(svc.Spec.Ports) != 3 || len(svc.Spec.Selector) != 0 {
		t.Errorf("kube-dns Service: got %+v, want 10.96.0.10, dns, dns-tcp and metrics, no selector", svc.Spec)
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
	// dead stops renewing; alive watches its Lease stand still for a
	// minute.
	clock := time.Now()
	alive.now = func() time.Time { return clock }
	if err := alive.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	if err := alive.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	list, _ := c.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 || list.Items[0].Name != "kube-dns-alive" {
		t.Errorf("slices after the dead server's Lease expired: got %d (%v), want only kube-dns-alive", len(list.Items), list.Items)
	}
	// Identities come and go as pods restart under new names: the one
	// removed must not stay in memory for good.
	if _, ok := alive.seen["kube-dns-dead"]; ok {
		t.Errorf("sightings after the dead server was removed: got %v, want none of kube-dns-dead", alive.seen)
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

// The kube-dns Service has CoreDNS's ports: dns 53/UDP, dns-tcp 53/TCP and
// metrics 9153/TCP. The endpoint carries the metrics port only where this
// server's /metrics answers on the published address.
func TestPublishPorts(t *testing.T) {
	coreDNSPorts := []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}
	tests := []struct {
		name        string
		existing    []corev1.ServicePort // the Service before; nil: none
		metricsPort int
		wantService []string
		wantSlice   []string
	}{
		{name: "new Service, metrics on the endpoint's address", metricsPort: 9153,
			wantService: coreDNSPorts, wantSlice: []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}},
		{name: "metrics on another port", metricsPort: 19153,
			wantService: coreDNSPorts, wantSlice: []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 19153/TCP"}},
		{name: "metrics only on loopback", metricsPort: 0,
			wantService: coreDNSPorts, wantSlice: []string{"dns 53/UDP", "dns-tcp 53/TCP"}},
		{name: "a Service without the metrics port gains it", metricsPort: 9153,
			existing: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53}},
			wantService: coreDNSPorts, wantSlice: []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}},
		{name: "9153/TCP taken under another name: left alone", metricsPort: 9153,
			existing: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
				{Name: "prometheus", Protocol: corev1.ProtocolTCP, Port: 9153}},
			wantService: []string{"dns 53/UDP", "dns-tcp 53/TCP", "prometheus 9153/TCP"},
			wantSlice:   []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientset()
			if tc.existing != nil {
				c = fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
					Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: tc.existing}})
			}
			o := opts("node1")
			o.MetricsPort = tc.metricsPort
			if err := New(c, o).sync(ctx, true); err != nil {
				t.Fatal(err)
			}
			svc, err := c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range svc.Spec.Ports {
				got = append(got, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
			}
			if !slices.Equal(got, tc.wantService) {
				t.Errorf("Service ports: got %q, want %q", got, tc.wantService)
			}
			if got := slicePorts(t, c); !slices.Equal(got, tc.wantSlice) {
				t.Errorf("EndpointSlice ports: got %q, want %q", got, tc.wantSlice)
			}
		})
	}
}

// A server restarted with /metrics reachable rewrites its slice.
func TestPublishUpdatesTheMetricsPort(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	o := opts("node1")
	if err := New(c, o).sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	o.MetricsPort = 9153
	if err := New(c, o).sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	want := []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}
	if got := slicePorts(t, c); !slices.Equal(got, want) {
		t.Errorf("EndpointSlice ports: got %q, want %q", got, want)
	}
}

// A hand-made kube-dns Service with one unnamed port cannot take more
// ports (a Service with several must name each), and a Service that cannot
// be updated must not stop the endpoint from being published: pods need
// the DNS more than the metrics port.
func TestPublishDespiteAServiceItCannotUpdate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ports    []corev1.ServicePort
		failing  bool
		wantSvc  int
		wantPort []string
	}{
		{"one unnamed port", []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}}, false, 1,
			[]string{"dns 53/UDP", "dns-tcp 53/TCP"}},
		{"update refused", []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}, true, 1,
			[]string{"dns 53/UDP", "dns-tcp 53/TCP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientset(&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
				Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: tc.ports},
			})
			if tc.failing {
				c.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("refused")
				})
			}
			if err := New(c, opts("node1")).sync(ctx, true); err != nil {
				t.Fatalf("sync: %v, want nil", err)
			}
			svc, err := c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(svc.Spec.Ports); got != tc.wantSvc {
				t.Errorf("Service ports: got %d, want %d", got, tc.wantSvc)
			}
			if got := slicePorts(t, c); !slices.Equal(got, tc.wantPort) {
				t.Errorf("EndpointSlice ports: got %q, want %q", got, tc.wantPort)
			}
		})
	}
}

func slicePorts(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	s, err := c.DiscoveryV1().EndpointSlices("kube-system").Get(context.Background(), "kube-dns-node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range s.Ports {
		out = append(out, fmt.Sprintf("%s %d/%s", *p.Name, *p.Port, *p.Protocol))
	}
	return out
}

func TestMetricsPort(t *testing.T) {
	endpoint := netip.MustParseAddr("10.100.1.1")
	tests := []struct {
		bind string
		want int
	}{
		{"127.0.0.1:9153", 0},
		{"0.0.0.0:9153", 9153},
		{"[::]:9153", 9153},
		{":9153", 9153},
		{"10.100.1.1:19153", 19153},
		{"10.100.1.2:9153", 0},
		{"0.0.0.0:0", 0},
		{"", 0},
		{"localhost:9153", 0},
	}
	for _, tc := range tests {
		t.Run(tc.bind, func(t *testing.T) {
			if got := MetricsPort(tc.bind, endpoint); got != tc.want {
				t.Errorf("MetricsPort(%q, %s): got %d, want %d", tc.bind, endpoint, got, tc.want)
			}
		})
	}
}

// TestPublishKeepsServersThatCouldNotRenewWhileTheAPIWasDown pins the DNS
// gap after an API outage: every server's Lease was old when the API came
// back, and the first server to sync removed the others' endpoints before
// they could renew.
func TestPublishKeepsServersThatCouldNotRenewWhileTheAPIWasDown(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	other, p := New(c, opts("other")), New(c, opts("self"))
	clock := time.Now()
	p.now = func() time.Time { return clock }
	for _, s := range []*Publisher{other, p} {
		if err := s.sync(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	// The API is down for a minute: p's round fails, and other's Lease,
	// which it could not renew either, is a minute old when it returns.
	down := errors.New("connection refused")
	c.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, down })
	if err := p.sync(ctx, true); err == nil {
		t.Fatal("sync with the API down: got no error")
	}
	p.seen = nil // as Run does after a failed round
	c.ReactionChain = c.ReactionChain[1:]
	l, _ := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-dns-other", metav1.GetOptions{})
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clock.Add(-time.Minute)))
	c.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
	slices := func() []string {
		list, _ := c.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{})
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		return names
	}
	if err := p.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := slices(); len(got) != 2 {
		t.Errorf("slices right after the API returned: got %v, want both servers'", got)
	}
	// other never renews: after a whole Lease duration watched, it goes.
	clock = clock.Add(41 * time.Second)
	if err := p.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := slices(); len(got) != 1 || got[0] != "kube-dns-self" {
		t.Errorf("slices after other stayed silent for its Lease duration: got %v, want kube-dns-self only", got)
	}
}
