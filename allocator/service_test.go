package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/apiserver/svcconfig"
)

var testCfg = svcconfig.ServiceConfig{
	ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/24"), netip.MustParsePrefix("fd00::/120")},
	NodePortRange:   svcconfig.PortRange{Base: 30000, Size: 200},
}

func svc(name string, typ corev1.ServiceType, families ...corev1.IPFamily) *corev1.Service {
	if len(families) == 0 {
		families = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, IPFamilies: families,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

func allocate(t *testing.T, a *Allocator, s, old *corev1.Service) *Op {
	t.Helper()
	op, err := a.Allocate(context.Background(), s, old, false)
	if err != nil {
		t.Fatalf("allocate %s: %v", s.Name, err)
	}
	return op
}

func TestAllocateCreate(t *testing.T) {
	a := New(testCfg, NewMemoryStore())
	band := ipBand(254)

	t.Run("dynamic cluster IP from the upper band", func(t *testing.T) {
		s := svc("a", corev1.ServiceTypeClusterIP)
		allocate(t, a, s, nil).Finish(context.Background(), true)
		ip := netip.MustParseAddr(s.Spec.ClusterIP)
		if off, ok := newIPRange(testCfg.ClusterIPRanges[0]).offset(ip); !ok || off < band {
			t.Fatalf("got %s (offset %d), want an address of the upper band (offset >= %d)", ip, off, band)
		}
		if len(s.Spec.ClusterIPs) != 1 || s.Spec.ClusterIPs[0] != s.Spec.ClusterIP {
			t.Fatalf("clusterIPs %v do not match clusterIP %s", s.Spec.ClusterIPs, s.Spec.ClusterIP)
		}
	})
	t.Run("dual-stack gets one of each family", func(t *testing.T) {
		s := svc("dual", corev1.ServiceTypeClusterIP, corev1.IPv4Protocol, corev1.IPv6Protocol)
		allocate(t, a, s, nil)
		if len(s.Spec.ClusterIPs) != 2 || !netip.MustParseAddr(s.Spec.ClusterIPs[1]).Is6() {
			t.Fatalf("got %v, want an IPv4 and an IPv6 address", s.Spec.ClusterIPs)
		}
	})
	t.Run("static request in the lower band", func(t *testing.T) {
		s := svc("static", corev1.ServiceTypeClusterIP)
		s.Spec.ClusterIPs, s.Spec.ClusterIP = []string{"10.96.0.10"}, "10.96.0.10"
		allocate(t, a, s, nil)
	})
	for _, tc := range []struct {
		name, ip string
		want     error
	}{
		{"already allocated", "10.96.0.10", ErrAllocated},
		{"out of range", "10.97.0.1", &IPRangeError{IP: netip.MustParseAddr("10.97.0.1"), ValidRange: "10.96.0.0/24"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("bad-"+tc.name, corev1.ServiceTypeClusterIP)
			s.Spec.ClusterIPs, s.Spec.ClusterIP = []string{tc.ip}, tc.ip
			_, err := a.Allocate(context.Background(), s, nil, false)
			want := RequestErrors{{Field: FieldClusterIP, IP: tc.ip, Err: tc.want}}
			if !reflect.DeepEqual(err, want) {
				t.Fatalf("got %v, want %v", err, want)
			}
		})
	}
	t.Run("headless and ExternalName get nothing", func(t *testing.T) {
		h := svc("headless", corev1.ServiceTypeClusterIP)
		h.Spec.ClusterIP, h.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		allocate(t, a, h, nil)
		e := svc("ext", corev1.ServiceTypeExternalName)
		allocate(t, a, e, nil)
		if h.Spec.ClusterIPs[0] != "None" || e.Spec.ClusterIP != "" {
			t.Fatalf("got headless %v, externalName %q", h.Spec.ClusterIPs, e.Spec.ClusterIP)
		}
	})
}

func TestAllocateNodePorts(t *testing.T) {
	a := New(testCfg, NewMemoryStore())
	t.Run("TCP and UDP of one port share a node port", func(t *testing.T) {
		s := svc("dns", corev1.ServiceTypeNodePort)
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
			{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP},
			{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP},
		}
		allocate(t, a, s, nil)
		p := s.Spec.Ports
		if p[0].NodePort == 0 || p[0].NodePort != p[1].NodePort || p[2].NodePort == p[0].NodePort {
			t.Fatalf("got node ports %d %d %d, want the first two equal and the third different", p[0].NodePort, p[1].NodePort, p[2].NodePort)
		}
		if !testCfg.NodePortRange.Contains(int(p[2].NodePort)) {
			t.Fatalf("node port %d outside %s", p[2].NodePort, testCfg.NodePortRange)
		}
	})
	t.Run("requested node port taken", func(t *testing.T) {
		s := svc("first", corev1.ServiceTypeNodePort)
		s.Spec.Ports[0].NodePort = 30005
		allocate(t, a, s, nil)
		s2 := svc("second", corev1.ServiceTypeNodePort)
		s2.Spec.Ports[0].NodePort = 30005
		_, err := a.Allocate(context.Background(), s2, nil, false)
		want := RequestErrors{{Field: FieldNodePort, Index: 0, Port: 30005, Err: ErrPortAllocated}}
		if !reflect.DeepEqual(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	})
	t.Run("LoadBalancer without node ports", func(t *testing.T) {
		s := svc("lb", corev1.ServiceTypeLoadBalancer)
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		allocate(t, a, s, nil)
		if s.Spec.Ports[0].NodePort != 0 {
			t.Fatalf("got node port %d, want none", s.Spec.Ports[0].NodePort)
		}
	})
	t.Run("LoadBalancer Local gets a health check node port", func(t *testing.T) {
		s := svc("local", corev1.ServiceTypeLoadBalancer)
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		allocate(t, a, s, nil)
		if s.Spec.HealthCheckNodePort == 0 || s.Spec.HealthCheckNodePort == s.Spec.Ports[0].NodePort {
			t.Fatalf("got healthCheckNodePort %d, node port %d", s.Spec.HealthCheckNodePort, s.Spec.Ports[0].NodePort)
		}
	})
}

// A value a Service names is never picked for another of its fields, even
// when it is the only free one.
func TestPicksAvoidTheServicesOwnClaims(t *testing.T) {
	small := svcconfig.ServiceConfig{ClusterIPRanges: testCfg.ClusterIPRanges, NodePortRange: svcconfig.PortRange{Base: 30000, Size: 3}}
	a := New(small, NewMemoryStore())
	taker := svc("taker", corev1.ServiceTypeNodePort)
	taker.Spec.Ports = []corev1.ServicePort{
		{Name: "a", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30001},
		{Name: "b", Port: 81, Protocol: corev1.ProtocolTCP, NodePort: 30002},
	}
	allocate(t, a, taker, nil)
	local := svc("local", corev1.ServiceTypeLoadBalancer)
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	local.Spec.Ports[0].NodePort = 30000
	_, err := a.Allocate(context.Background(), local, nil, false)
	if !errors.Is(err, ErrFull) {
		t.Fatalf("got %v (healthCheckNodePort %d, node port %d), want %v", err,
			local.Spec.HealthCheckNodePort, local.Spec.Ports[0].NodePort, ErrFull)
	}
}

func TestAllocateUpdateAndRelease(t *testing.T) {
	store := NewMemoryStore()
	a := New(testCfg, store)
	ctx := context.Background()
	held := func() int { m, _, _ := store.List(ctx); return len(m) }

	np := svc("np", corev1.ServiceTypeNodePort)
	allocate(t, a, np, nil).Finish(ctx, true)
	if held() != 2 {
		t.Fatalf("NodePort service holds %d reservations, want 2", held())
	}
	// NodePort -> ClusterIP: the node port goes once the update is stored.
	toClusterIP := np.DeepCopy()
	toClusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	toClusterIP.Spec.Ports[0].NodePort = 0
	op := allocate(t, a, toClusterIP, np)
	if held() != 2 {
		t.Fatal("released before the update was stored")
	}
	op.Finish(ctx, true)
	if held() != 1 || toClusterIP.Spec.ClusterIP != np.Spec.ClusterIP {
		t.Fatalf("after type change: %d reservations, IP %s -> %s", held(), np.Spec.ClusterIP, toClusterIP.Spec.ClusterIP)
	}
	// -> ExternalName frees the cluster IP.
	ext := toClusterIP.DeepCopy()
	ext.Spec.Type, ext.Spec.ClusterIP, ext.Spec.ClusterIPs = corev1.ServiceTypeExternalName, "", nil
	allocate(t, a, ext, toClusterIP).Finish(ctx, true)
	if held() != 0 {
		t.Fatalf("ExternalName still holds %d reservations", held())
	}
	// A failed write gives back what it reserved.
	failed := svc("failed", corev1.ServiceTypeNodePort)
	allocate(t, a, failed, nil).Finish(ctx, false)
	if held() != 0 {
		t.Fatalf("failed create left %d reservations", held())
	}
	// A dry run reserves nothing, but says what it would get.
	dry := svc("dry", corev1.ServiceTypeNodePort)
	if _, err := a.Allocate(ctx, dry, nil, true); err != nil || dry.Spec.ClusterIP == "" {
		t.Fatalf("dry run: %v, IP %q", err, dry.Spec.ClusterIP)
	}
	if ips, ports := a.Used(corev1.IPv4Protocol); held() != 0 || ips != 0 || ports != 0 {
		t.Fatalf("dry run left %d reservations, %d IPs and %d ports marked", held(), ips, ports)
	}
	// Delete releases everything.
	kept := svc("kept", corev1.ServiceTypeNodePort)
	allocate(t, a, kept, nil)
	a.Release(ctx, kept)
	if held() != 0 {
		t.Fatalf("delete left %d reservations", held())
	}
}

// TestConcurrentAllocatorsShareNothing: two allocators (two API servers)
// on one store hand out distinct addresses and ports under concurrency.
func TestConcurrentAllocatorsShareNothing(t *testing.T) {
	store := NewMemoryStore()
	small := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/25")},
		NodePortRange: svcconfig.PortRange{Base: 30000, Size: 130}}
	// Neither runs its watch: their bitmaps know only their own picks, the
	// worst case for collisions.
	servers := []*Allocator{New(small, store), New(small, store)}
	var mu sync.Mutex
	ips, ports := map[string]string{}, map[int32]string{}
	var wg sync.WaitGroup
	for i := range 120 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := svc(fmt.Sprintf("s%d", i), corev1.ServiceTypeNodePort)
			if _, err := servers[i%2].Allocate(context.Background(), s, nil, false); err != nil {
				t.Errorf("allocate %s: %v", s.Name, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := ips[s.Spec.ClusterIP]; dup {
				t.Errorf("%s and %s both got %s", other, s.Name, s.Spec.ClusterIP)
			}
			if other, dup := ports[s.Spec.Ports[0].NodePort]; dup {
				t.Errorf("%s and %s both got node port %d", other, s.Name, s.Spec.Ports[0].NodePort)
			}
			ips[s.Spec.ClusterIP], ports[s.Spec.Ports[0].NodePort] = s.Name, s.Name
		}()
	}
	wg.Wait()
	if len(ips) != 120 || len(ports) != 120 {
		t.Fatalf("got %d distinct IPs and %d ports, want 120 each", len(ips), len(ports))
	}
}

func TestRangeFull(t *testing.T) {
	tiny := svcconfig.ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/30")}}
	a := New(tiny, NewMemoryStore())
	for i := range 2 {
		allocate(t, a, svc(fmt.Sprint("s", i), corev1.ServiceTypeClusterIP), nil)
	}
	_, err := a.Allocate(context.Background(), svc("third", corev1.ServiceTypeClusterIP), nil, false)
	if !errors.Is(err, ErrFull) {
		t.Fatalf("got %v, want %v", err, ErrFull)
	}
}

func TestRepair(t *testing.T) {
	store := NewMemoryStore()
	a := New(testCfg, store)
	r := NewRepairer(a, time.Minute)
	clock := time.Unix(1000, 0)
	r.now = func() time.Time { return clock }
	ctx := context.Background()

	live := svc("live", corev1.ServiceTypeNodePort)
	allocate(t, a, live, nil)
	leaked := svc("leaked", corev1.ServiceTypeClusterIP)
	allocate(t, a, leaked, nil) // reserved, but its create never stored
	// Stored with addresses the store does not know (e.g. restored data).
	unrecorded := svc("unrecorded", corev1.ServiceTypeClusterIP)
	unrecorded.Spec.ClusterIP, unrecorded.Spec.ClusterIPs = "10.96.0.77", []string{"10.96.0.77"}
	dup := svc("dup", corev1.ServiceTypeClusterIP)
	dup.Spec.ClusterIP, dup.Spec.ClusterIPs = live.Spec.ClusterIP, []string{live.Spec.ClusterIP}
	dup.CreationTimestamp = metav1.Unix(1<<40, 0)
	outside := svc("outside", corev1.ServiceTypeClusterIP)
	outside.Spec.ClusterIP, outside.Spec.ClusterIPs = "192.0.2.1", []string{"192.0.2.1"}

	services := []corev1.Service{*live, *unrecorded, *dup, *outside}
	problems, err := r.Repair(ctx, services)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, p := range problems {
		reasons[p.Name] = p.Reason
	}
	if reasons["dup"] != "ClusterIPAlreadyAllocated" || reasons["outside"] != "ClusterIPOutOfRange" || len(problems) != 2 {
		t.Fatalf("problems: got %+v", problems)
	}
	owners, _, _ := store.List(ctx)
	if owners[ipKey(netip.MustParseAddr("10.96.0.77"))] != "default/unrecorded" {
		t.Fatal("repair did not record the unrecorded service's address")
	}
	leakKey := ipKey(netip.MustParseAddr(leaked.Spec.ClusterIP))
	if _, ok := owners[leakKey]; !ok {
		t.Fatal("leak freed on the first pass; a create in flight would lose its address")
	}
	// A second pass within the grace keeps it: repair may run often.
	clock = clock.Add(30 * time.Second)
	if _, err := r.Repair(ctx, services); err != nil {
		t.Fatal(err)
	}
	if owners, _, _ = store.List(ctx); owners[leakKey] == "" {
		t.Fatal("leak freed before its grace passed")
	}
	clock = clock.Add(31 * time.Second)
	if _, err := r.Repair(ctx, services); err != nil {
		t.Fatal(err)
	}
	owners, _, _ = store.List(ctx)
	if _, ok := owners[leakKey]; ok {
		t.Fatal("leak still held after the grace")
	}
	if _, ok := owners[ipKey(netip.MustParseAddr(live.Spec.ClusterIP))]; !ok {
		t.Fatal("repair freed a live service's address")
	}
}

// TestRepairReportsReservedAddress: a stored Service holding the network
// address of the range (restored data, or written by a server that let it
// through) is reported as out of range, as upstream's repair does.
func TestRepairReportsReservedAddress(t *testing.T) {
	a := New(testCfg, NewMemoryStore())
	s := svc("network", corev1.ServiceTypeClusterIP)
	s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.0", []string{"10.96.0.0"}
	problems, err := NewRepairer(a, time.Minute).Repair(context.Background(), []corev1.Service{*s})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Reason != "ClusterIPOutOfRange" {
		t.Fatalf("got %+v, want one ClusterIPOutOfRange", problems)
	}
}
