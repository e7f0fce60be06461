package proxy

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"portal.dev/portal/proxy/snapshot"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"zero value is valid", Options{}, ""},
		{"defaults are valid", DefaultOptions(), ""},
		{"iptables", Options{Mode: "iptables"}, ""},
		{"userspace", Options{Mode: "userspace"}, ""},
		{"scheduler maglev", Options{Mode: "userspace", Scheduler: "maglev"}, ""},
		{"unknown scheduler", Options{Mode: "userspace", Scheduler: "wrr"}, "--scheduler"},
		{"negative drain timeout", Options{DrainTimeout: -time.Second}, "--drain-timeout"},
		{"unknown mode", Options{Mode: "ipvs"}, "--proxy-mode: unknown"},
		{"nodeport CIDRs", Options{NodePortAddresses: []string{"10.0.0.0/8", "fd00::/64"}}, ""},
		{"nodeport primary", Options{NodePortAddresses: []string{"primary"}}, ""},
		{"nodeport garbage", Options{NodePortAddresses: []string{"eth0"}}, "--nodeport-addresses"},
		{"nodeport all with CIDR", Options{NodePortAddresses: []string{"all", "10.0.0.0/8"}}, "--nodeport-addresses"},
		{"cluster CIDR dual-stack", Options{ClusterCIDR: "10.244.0.0/16,fd00:244::/56"}, ""},
		{"cluster CIDR twice one family", Options{ClusterCIDR: "10.244.0.0/16,10.245.0.0/16"}, "--cluster-cidr"},
		{"cluster CIDR garbage", Options{ClusterCIDR: "pods"}, "--cluster-cidr"},
		// Issue #16: masked silently before, where node IPAM refused it.
		{"cluster CIDR with host bits", Options{ClusterCIDR: "10.244.1.0/16"}, "--cluster-cidr: 10.244.1.0/16 has host bits set (did you mean 10.244.0.0/16?)"},
		{"min above sync period", Options{MinSyncPeriod: time.Minute, SyncPeriod: time.Second}, "--min-sync-period"},
		{"bad healthz address", Options{HealthzBindAddress: "10256"}, "--healthz-bind-address"},
		{"bad metrics address", Options{MetricsBindAddress: "localhost"}, "--metrics-bind-address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// Off Linux only the userspace mode runs (issue 7: the one mode that runs
// off Linux); the rest fails naming the flag, before any client is made.
func TestNeedsLinux(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		goos    string
		wantErr string
	}{
		{"linux: nftables", Options{Mode: ModeNFTables}, "linux", ""},
		{"linux: cleanup", Options{Cleanup: true}, "linux", ""},
		{"darwin: userspace", Options{Mode: ModeUserspace}, "darwin", ""},
		{"windows: userspace", Options{Mode: ModeUserspace}, "windows", ""},
		{"darwin: nftables", Options{Mode: ModeNFTables}, "darwin", "--proxy-mode nftables needs Linux (this is darwin)"},
		{"windows: iptables", Options{Mode: ModeIPTables}, "windows", "--proxy-mode iptables needs Linux (this is windows)"},
		{"darwin: default mode", DefaultOptions(), "darwin", "--proxy-mode nftables needs Linux"},
		{"darwin: cleanup", Options{Mode: ModeUserspace, Cleanup: true}, "darwin", "--cleanup needs Linux (this is darwin)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := needsLinux(tc.o, tc.goos)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestHostname(t *testing.T) {
	got, err := Options{HostnameOverride: " Node-1 "}.hostname()
	if err != nil || got != "node-1" {
		t.Errorf("got %q, %v; want node-1", got, err)
	}
}

func TestBuildNode(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("192.168.1.5"), netip.MustParseAddr("fd00::5")}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: toBeDeletedTaint}}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeHostName, Address: "node1"},
			{Type: v1.NodeExternalIP, Address: "203.0.113.5"},
			{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
		}},
	}
	tests := []struct {
		name     string
		node     *v1.Node
		spec     nodePortSpec
		want     string
		wantZone string
		eligible bool
	}{
		{"no Node object: local addresses, all", nil, nodePortSpec{all: true}, "all [10.0.0.5 192.168.1.5 fd00::5]", "", true},
		{"Node object: its addresses, zone, taint", node, nodePortSpec{all: true}, "all [10.0.0.5 192.168.1.5 fd00::5]", "zone-a", false},
		{"primary: first of each family", node, nodePortSpec{primary: true}, "[10.0.0.5]", "zone-a", false},
		{"primary without Node: local addresses", nil, nodePortSpec{primary: true}, "[10.0.0.5 fd00::5]", "", true},
		{"CIDRs select local addresses", nil, nodePortSpec{cidrs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8")}}, "[192.168.1.5 fd00::5]", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := buildNode("node1", tc.node, local, tc.spec)
			got := ""
			if n.NodePorts.All {
				got = "all "
			}
			var addrs []string
			for _, a := range n.NodePorts.Addrs {
				addrs = append(addrs, a.String())
			}
			got += "[" + strings.Join(addrs, " ") + "]"
			if got != tc.want || n.Zone != tc.wantZone || n.Eligible != tc.eligible {
				t.Errorf("got %s zone=%q eligible=%v, want %s zone=%q eligible=%v", got, n.Zone, n.Eligible, tc.want, tc.wantZone, tc.eligible)
			}
		})
	}
	if n := buildNode("node1", node, local, nodePortSpec{all: true}); n.Addresses[0].String() != "10.0.0.5" || n.Addresses[1].String() != "203.0.113.5" {
		t.Errorf("Node addresses: got %v, want InternalIP then ExternalIP", n.Addresses)
	}
}

// fakeProxier records requests and hands them to the test.
type fakeProxier struct {
	mu       sync.Mutex
	fail     int
	requests chan snapshot.Request
}

func (f *fakeProxier) Sync(_ context.Context, req snapshot.Request) error {
	f.requests <- req
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return errors.New("injected")
	}
	return nil
}

func (f *fakeProxier) Cleanup(context.Context) error { return nil }

func (f *fakeProxier) next(t *testing.T) snapshot.Request {
	t.Helper()
	select {
	case r := <-f.requests:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no sync within 10s")
	}
	return snapshot.Request{}
}

func TestProxyRun(t *testing.T) {
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	client := fake.NewClientset(
		&v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		},
		&v1.Service{ // served by another proxy: ignored
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other", Labels: map[string]string{labelServiceProxyName: "someone-else"}},
			Spec:       v1.ServiceSpec{ClusterIP: "10.96.0.11", ClusterIPs: []string{"10.96.0.11"}, Ports: []v1.ServicePort{{Port: 80}}},
		},
		&discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
			Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.244.1.5"}, NodeName: ptr.To("node1")}},
		},
	)
	fp := &fakeProxier{requests: make(chan snapshot.Request, 16), fail: 1}
	local := func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.0.2.5")}, nil }
	p, err := newProxy(client, Options{HostnameOverride: "node1", SyncPeriod: time.Hour}, fp, nil, local)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	// The first sync is full and sees the Service, its endpoint (local),
	// and a node made of local addresses since there is no Node object.
	req := fp.next(t)
	if !req.Full {
		t.Error("first sync not full")
	}
	if _, ok := req.Snapshot.Services[types.NamespacedName{Namespace: "default", Name: "other"}]; ok || len(req.Snapshot.Services) != 1 {
		t.Errorf("Services: got %v, want only default/web", req.Snapshot.Services)
	}
	eps := req.Snapshot.Endpoints[web].For(snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP})
	if len(eps) != 1 || !eps[0].Local {
		t.Errorf("endpoints: got %v", eps)
	}
	if n := req.Snapshot.Node; n.Name != "node1" || len(n.Addresses) != 1 || n.Addresses[0].String() != "192.0.2.5" {
		t.Errorf("node: got %+v", n)
	}
	if p.Ready() {
		t.Error("Ready after a failed first sync")
	}
	// It failed: the retry is full again and carries the same changes.
	req = fp.next(t)
	if !req.Full || len(req.Changed) != 1 {
		t.Errorf("retry: full=%v changed=%v", req.Full, req.Changed)
	}
	waitFor(t, p.Ready)

	// The Node object appears with a zone: a full sync sees it.
	client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{v1.LabelTopologyZone: "z1"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}}, metav1.CreateOptions{})
	req = fp.next(t)
	if !req.Full || req.Snapshot.Node.Zone != "z1" || req.Snapshot.Node.Addresses[0].String() != "10.0.0.1" {
		t.Errorf("after Node created: full=%v node=%+v", req.Full, req.Snapshot.Node)
	}

	// An endpoint change is a partial sync of that Service only.
	slice, _ := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "web-1", metav1.GetOptions{})
	slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{"10.244.2.7"}, NodeName: ptr.To("node2")})
	client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{})
	req = fp.next(t)
	if req.Full || len(req.Changed) != 1 {
		t.Errorf("endpoint change: full=%v changed=%v", req.Full, req.Changed)
	}
	if n := len(req.Snapshot.Endpoints[web].For(snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP})); n != 2 {
		t.Errorf("endpoints after update: got %d", n)
	}

	// Deleting the Service is a partial sync without it.
	client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{})
	req = fp.next(t)
	if _, ok := req.Snapshot.Services[web]; ok || req.Full {
		t.Errorf("after delete: full=%v services=%v", req.Full, req.Snapshot.Services)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// waitFor polls cond; the sync it waits for is already under way, so it
// is short.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A heartbeat (new conditions and resourceVersion) must not cost a sync;
// anything the proxy reads from its Node must.
func TestSameNode(t *testing.T) {
	base := func() *v1.Node {
		return &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Labels: map[string]string{v1.LabelTopologyZone: "a"}},
			Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}},
			Status: v1.NodeStatus{
				Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}},
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		}
	}
	tests := []struct {
		name   string
		change func(*v1.Node)
		same   bool
	}{
		{"heartbeat", func(n *v1.Node) {
			n.ResourceVersion = "2"
			n.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
		}, true},
		{"zone label", func(n *v1.Node) { n.Labels[v1.LabelTopologyZone] = "b" }, false},
		{"new label", func(n *v1.Node) { n.Labels["x"] = "y" }, false},
		{"address", func(n *v1.Node) { n.Status.Addresses[0].Address = "10.0.0.2" }, false},
		{"taint", func(n *v1.Node) { n.Spec.Taints = nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := base()
			tt.change(cur)
			if got := sameNode(base(), cur); got != tt.same {
				t.Errorf("sameNode = %v, want %v", got, tt.same)
			}
		})
	}
}
