package index

import (
	"net/netip"
	"slices"
	"testing"
)

func ips(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestServices(t *testing.T) {
	x := &Index{}
	steps := []struct {
		name       string
		do         func()
		svc        *Key
		wantSvc    bool
		wantNS     string
		wantNSSeen bool
		reverse    string
		wantRev    []Target
	}{
		{name: "add", do: func() {
			x.SetService(&Service{Namespace: "NS", Name: "Web", ClusterIPs: ips("10.0.0.1")})
		}, svc: &Key{"ns", "web"}, wantSvc: true, wantNS: "ns", wantNSSeen: true,
			reverse: "10.0.0.1", wantRev: []Target{{Namespace: "NS", Service: "Web"}}},
		{name: "update moves the cluster IP", do: func() {
			x.SetService(&Service{Namespace: "NS", Name: "Web", ClusterIPs: ips("10.0.0.2")})
		}, svc: &Key{"ns", "web"}, wantSvc: true, wantNS: "ns", wantNSSeen: true, reverse: "10.0.0.1"},
		{name: "delete", do: func() { x.DeleteService("NS", "Web") },
			svc: &Key{"ns", "web"}, wantNS: "ns", reverse: "10.0.0.2"},
		{name: "delete again is a no-op", do: func() { x.DeleteService("NS", "Web") },
			svc: &Key{"ns", "web"}, wantNS: "ns"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := x.Generation()
			st.do()
			if got := x.Service(st.svc.Namespace, st.svc.Name) != nil; got != st.wantSvc {
				t.Errorf("service exists: got %v, want %v", got, st.wantSvc)
			}
			if got := x.NamespaceExists(st.wantNS); got != st.wantNSSeen {
				t.Errorf("namespace exists: got %v, want %v", got, st.wantNSSeen)
			}
			if st.reverse != "" {
				if got := x.Reverse(netip.MustParseAddr(st.reverse)); !slices.Equal(got, st.wantRev) {
					t.Errorf("Reverse(%s): got %v, want %v", st.reverse, got, st.wantRev)
				}
			}
			if st.name != "delete again is a no-op" && x.Generation() == before {
				t.Errorf("generation: got unchanged %d, want a change", before)
			}
		})
	}
}

func TestEndpointSlices(t *testing.T) {
	x := &Index{}
	x.SetService(&Service{Namespace: "ns", Name: "hl", Kind: Headless})
	x.SetService(&Service{Namespace: "ns", Name: "other", Kind: Headless})
	x.SetEndpointSlice(&EndpointSlice{Namespace: "ns", Name: "s1", Service: "hl",
		Endpoints: []Endpoint{{Addresses: ips("10.1.0.1"), Hostname: "Pet", Ready: true}, {Addresses: ips("10.1.0.2"), Ready: false}}})
	x.SetEndpointSlice(&EndpointSlice{Namespace: "ns", Name: "s2", Service: "hl",
		Endpoints: []Endpoint{{Addresses: ips("10.1.0.3"), Ready: true}}})

	if got := len(x.EndpointSlices("ns", "hl")); got != 2 {
		t.Fatalf("slices of hl: got %d, want 2", got)
	}
	for _, tc := range []struct {
		ip   string
		want []Target
	}{
		{"10.1.0.1", []Target{{"ns", "hl", "pet"}}},
		{"10.1.0.2", nil}, // not ready
		{"10.1.0.3", []Target{{"ns", "hl", "10-1-0-3"}}},
	} {
		if got := x.Reverse(netip.MustParseAddr(tc.ip)); !slices.Equal(got, tc.want) {
			t.Errorf("Reverse(%s): got %v, want %v", tc.ip, got, tc.want)
		}
	}

	// A slice whose service label changes moves to the other Service.
	x.SetEndpointSlice(&EndpointSlice{Namespace: "ns", Name: "s2", Service: "other",
		Endpoints: []Endpoint{{Addresses: ips("10.1.0.4"), Ready: true}}})
	if got, want := len(x.EndpointSlices("ns", "hl")), 1; got != want {
		t.Errorf("slices of hl after relabel: got %d, want %d", got, want)
	}
	if got, want := len(x.EndpointSlices("ns", "other")), 1; got != want {
		t.Errorf("slices of other after relabel: got %d, want %d", got, want)
	}
	if got := x.Reverse(netip.MustParseAddr("10.1.0.3")); got != nil {
		t.Errorf("Reverse of a replaced address: got %v, want none", got)
	}
	x.DeleteEndpointSlice("ns", "s2")
	if got := len(x.EndpointSlices("ns", "other")); got != 0 {
		t.Errorf("slices after delete: got %d, want 0", got)
	}
	if got := x.Stats(); got.EndpointSlices != 1 {
		t.Errorf("stats: got %+v, want 1 slice", got)
	}
	// Reverse names only for headless Services.
	x.SetService(&Service{Namespace: "ns", Name: "hl", Kind: ClusterIP})
	if got := x.Reverse(netip.MustParseAddr("10.1.0.1")); got != nil {
		t.Errorf("Reverse of a ClusterIP service's endpoint: got %v, want none", got)
	}
}

func TestPublishNotReady(t *testing.T) {
	x := &Index{}
	x.SetService(&Service{Namespace: "ns", Name: "hl", Kind: Headless, PublishNotReady: true})
	x.SetEndpointSlice(&EndpointSlice{Namespace: "ns", Name: "s1", Service: "hl",
		Endpoints: []Endpoint{{Addresses: ips("10.1.0.2"), Ready: false}}})
	want := []Target{{"ns", "hl", "10-1-0-2"}}
	if got := x.Reverse(netip.MustParseAddr("10.1.0.2")); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNamespacesAndPods(t *testing.T) {
	x := &Index{}
	x.SetNamespace("Team")
	if !x.NamespaceExists("team") {
		t.Errorf("namespace team: got missing, want present")
	}
	x.DeleteNamespace("team")
	if x.NamespaceExists("team") {
		t.Errorf("deleted namespace team: got present, want missing")
	}
	ip := netip.MustParseAddr("10.244.0.5")
	x.SetPod("ns", "a", []netip.Addr{ip})
	x.SetPod("ns", "b", []netip.Addr{ip})
	x.DeletePod("ns", "a")
	if !x.PodIPExists("ns", ip) {
		t.Errorf("pod IP held by b: got missing, want present")
	}
	x.SetPod("ns", "b", nil)
	if x.PodIPExists("ns", ip) {
		t.Errorf("pod IP after b lost it: got present, want missing")
	}
	gen := x.Generation()
	x.SetPod("ns", "b", nil)
	if x.Generation() != gen {
		t.Errorf("unchanged pod: generation moved")
	}
}

func TestDashedIP(t *testing.T) {
	for _, tc := range []struct{ ip, want string }{
		{"10.1.2.3", "10-1-2-3"},
		{"fd00::1", "fd00--1"},
		{"fd00::", "fd00--0"},
		{"::1", "--1"},
	} {
		if got := DashedIP(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("DashedIP(%s): got %q, want %q", tc.ip, got, tc.want)
		}
	}
}
