package conntrack

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

var dnsName = types.NamespacedName{Namespace: "kube-system", Name: "dns"}

// dnsService is a UDP Service with every kind of frontend.
func dnsService() *snapshot.Service {
	return &snapshot.Service{
		Name:             dnsName,
		ClusterIPs:       []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		ExternalIPs:      []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		LoadBalancerVIPs: []netip.Addr{netip.MustParseAddr("192.0.2.2")},
		Ports: []snapshot.Port{
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
			{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53, NodePort: 30054},
		},
	}
}

func endpoints(addrs ...string) *snapshot.ServiceEndpoints {
	var udp, tcp []*snapshot.Endpoint
	for _, a := range addrs {
		ap := netip.MustParseAddrPort(a)
		udp = append(udp, &snapshot.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true})
		tcp = append(tcp, &snapshot.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true})
	}
	return &snapshot.ServiceEndpoints{ByPort: map[snapshot.PortKey][]*snapshot.Endpoint{
		{Name: "dns", Protocol: v1.ProtocolUDP}:     udp,
		{Name: "dns-tcp", Protocol: v1.ProtocolTCP}: tcp,
	}}
}

func snap(svc *snapshot.Service, eps *snapshot.ServiceEndpoints) *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		Services:  map[types.NamespacedName]*snapshot.Service{},
		Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{},
		Node: &snapshot.Node{Name: "node1", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.100")},
			NodePorts: snapshot.NodePortAddresses{All: true, Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.100")}}},
	}
	if svc != nil {
		s.Services[svc.Name] = svc
	}
	if eps != nil {
		s.Endpoints[dnsName] = eps
	}
	return s
}

func changedDNS() map[types.NamespacedName]struct{} {
	return map[types.NamespacedName]struct{}{dnsName: {}}
}

func strs(fs []Filter) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

func check(t *testing.T, got []Filter, want ...string) {
	t.Helper()
	slices.Sort(want)
	g := strs(got)
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(g, want) {
		t.Errorf("deletions:\ngot:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

// Kubernetes issue 19029: UDP flows stay on an endpoint that left the
// Service. Its DNATed entries must go (cluster IP case).
func TestIssue19029RemovedEndpointLosesItsFlows(t *testing.T) {
	prev := snap(dnsService(), endpoints("10.244.1.5:53", "10.244.2.7:53"))
	cur := snap(dnsService(), endpoints("10.244.2.7:53"))
	check(t, Changes(prev, cur, changedDNS()),
		"udp orig-dst=10.96.0.10 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.1 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.2 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-port-dst=30053 reply-src=10.244.1.5 reply-port-src=53",
	)
}

// Kubernetes issue 48370: packets that arrive while a Service has no
// endpoints create entries that are not DNATed; when endpoints appear,
// those must go or the flow never reaches them.
func TestIssue48370NoEndpointsToSomeClearsUnDNATedEntries(t *testing.T) {
	prev := snap(dnsService(), nil)
	cur := snap(dnsService(), endpoints("10.244.1.5:53"))
	check(t, Changes(prev, cur, changedDNS()),
		"udp orig-dst=10.96.0.10 orig-port-dst=53 reply-src=10.96.0.10",
		"udp orig-dst=192.0.2.1 orig-port-dst=53 reply-src=192.0.2.1",
		"udp orig-dst=192.0.2.2 orig-port-dst=53 reply-src=192.0.2.2",
		"udp orig-dst=192.0.2.100 orig-port-dst=30053 reply-src=192.0.2.100",
	)
	// Unready endpoints are not endpoints: nothing to clear yet (the
	// rules still reject), or the entries would come right back.
	unready := endpoints("10.244.1.5:53")
	for _, e := range unready.ByPort[snapshot.PortKey{Name: "dns", Protocol: v1.ProtocolUDP}] {
		e.Ready, e.Serving = false, false
	}
	check(t, Changes(prev, snap(dnsService(), unready), changedDNS()))
}

// Kubernetes issue 59368: senders outside the cluster (NodePort, load
// balancer, externalIP) keep sending to a removed endpoint. Also: a new
// external frontend on a Service that already had endpoints.
func TestIssue59368ExternalFrontends(t *testing.T) {
	prev := snap(dnsService(), endpoints("10.244.1.5:53"))
	cur := snap(dnsService(), endpoints("10.244.2.7:53"))
	got := strs(Changes(prev, cur, changedDNS()))
	for _, want := range []string{
		"udp orig-port-dst=30053 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.1 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.2 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	withNewIP := dnsService()
	withNewIP.ExternalIPs = append(withNewIP.ExternalIPs, netip.MustParseAddr("192.0.2.3"))
	check(t, Changes(snap(dnsService(), endpoints("10.244.1.5:53")), snap(withNewIP, endpoints("10.244.1.5:53")), changedDNS()),
		"udp orig-dst=192.0.2.3 orig-port-dst=53 reply-src=192.0.2.3")
}

// Kubernetes issue 122740: a restarted proxy must not clear the flows
// of Services whose endpoints did not change: only entries that are not
// DNATed are deleted, never those DNATed to a serving endpoint.
func TestIssue122740RestartKeepsHealthyFlows(t *testing.T) {
	cur := snap(dnsService(), endpoints("10.244.1.5:53"))
	for _, f := range Changes(nil, cur, changedDNS()) {
		if f.ReplySrc != f.OrigDst {
			t.Errorf("restart deletes DNATed flows: %s", f)
		}
	}
	// The reconciler (full syncs) agrees: a DNATed entry to a serving
	// endpoint stays, an un-DNATed one goes.
	entries := []Entry{
		{Protocol: v1.ProtocolUDP, OrigSrc: netip.MustParseAddr("10.0.0.9"), OrigSrcPort: 4000, OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 53, ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 53},
		{Protocol: v1.ProtocolUDP, OrigSrc: netip.MustParseAddr("10.0.0.9"), OrigSrcPort: 4001, OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 53, ReplySrc: netip.MustParseAddr("10.96.0.10"), ReplySrcPort: 53},
	}
	check(t, Reconcile(entries, cur, v1.IPv4Protocol), "udp orig-dst=10.96.0.10 orig-port-dst=53 reply-src=10.96.0.10 reply-port-src=53")
}

// Kubernetes issue 139628: scaling a UDP Service to zero must still
// clear the flows to the endpoints that left, or one-way senders keep
// them alive forever.
func TestIssue139628ScaleToZeroClearsFlows(t *testing.T) {
	prev := snap(dnsService(), endpoints("10.244.1.5:53"))
	cur := snap(dnsService(), nil)
	check(t, Changes(prev, cur, changedDNS()),
		"udp orig-dst=10.96.0.10 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.1 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.2 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-port-dst=30053 reply-src=10.244.1.5 reply-port-src=53",
	)
	// The reconciler clears them too, even with no endpoint left.
	entries := []Entry{{Protocol: v1.ProtocolUDP, OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 53, ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 53}}
	check(t, Reconcile(entries, cur, v1.IPv4Protocol), "udp orig-dst=10.96.0.10 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53")
	// And a deleted Service loses its flows the same way.
	check(t, Changes(prev, snap(nil, nil), changedDNS()),
		"udp orig-dst=10.96.0.10 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.1 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-dst=192.0.2.2 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53",
		"udp orig-port-dst=30053 reply-src=10.244.1.5 reply-port-src=53",
	)
}

func TestNothingForTCPOrUnchangedServices(t *testing.T) {
	s := snap(dnsService(), endpoints("10.244.1.5:53"))
	check(t, Changes(s, s, changedDNS()))
	check(t, Changes(snap(dnsService(), endpoints("10.244.1.5:53")), snap(dnsService(), endpoints("10.244.2.7:53")), nil))
	// A terminating endpoint that still serves keeps its flows.
	term := endpoints("10.244.1.5:53")
	for _, e := range term.ByPort[snapshot.PortKey{Name: "dns", Protocol: v1.ProtocolUDP}] {
		e.Ready, e.Serving, e.Terminating = false, true, true
	}
	check(t, Changes(s, snap(dnsService(), term), changedDNS()))
}

func TestReconcileNodePortsOnlyOnNodeAddresses(t *testing.T) {
	cur := snap(dnsService(), endpoints("10.244.1.5:53"))
	entries := []Entry{
		// To a node address on the NodePort, answered by a gone endpoint.
		{Protocol: v1.ProtocolUDP, OrigDst: netip.MustParseAddr("192.0.2.100"), OrigDstPort: 30053, ReplySrc: netip.MustParseAddr("10.244.9.9"), ReplySrcPort: 53},
		// Same port number to somewhere else entirely: not ours.
		{Protocol: v1.ProtocolUDP, OrigDst: netip.MustParseAddr("198.51.100.1"), OrigDstPort: 30053, ReplySrc: netip.MustParseAddr("198.51.100.1"), ReplySrcPort: 30053},
		// Healthy NodePort flow.
		{Protocol: v1.ProtocolUDP, OrigDst: netip.MustParseAddr("192.0.2.100"), OrigDstPort: 30053, ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 53},
	}
	check(t, Reconcile(entries, cur, v1.IPv4Protocol), "udp orig-dst=192.0.2.100 orig-port-dst=30053 reply-src=10.244.9.9 reply-port-src=53")
}

func TestParseList(t *testing.T) {
	out := `udp      17 29 src=10.0.0.2 dst=10.96.0.10 sport=5353 dport=53 [UNREPLIED] src=10.244.1.5 dst=10.0.0.2 sport=53 dport=5353 mark=0 use=1
udp      17 115 src=fd00::2 dst=fd00::10 sport=40000 dport=53 src=fd00::10 dst=fd00::2 sport=53 dport=40000 [ASSURED] mark=0 secctx=system_u:object_r:unlabeled_t:s0 use=1
garbage line
`
	got := ParseList(out, v1.ProtocolUDP)
	want := []Entry{
		{Protocol: v1.ProtocolUDP, OrigSrc: netip.MustParseAddr("10.0.0.2"), OrigDst: netip.MustParseAddr("10.96.0.10"), OrigSrcPort: 5353, OrigDstPort: 53, ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 53},
		{Protocol: v1.ProtocolUDP, OrigSrc: netip.MustParseAddr("fd00::2"), OrigDst: netip.MustParseAddr("fd00::10"), OrigSrcPort: 40000, OrigDstPort: 53, ReplySrc: netip.MustParseAddr("fd00::10"), ReplySrcPort: 53},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

type fakeCT struct {
	entries []Entry
	deleted []string
	listErr error
}

func (f *fakeCT) List(_ context.Context, fam snapshot.Family, _ v1.Protocol) ([]Entry, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []Entry
	for _, e := range f.entries {
		if snapshot.FamilyOf(e.OrigDst) == fam {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeCT) Delete(_ context.Context, flt Filter) (int, error) {
	f.deleted = append(f.deleted, flt.String())
	return 1, nil
}

func TestCleanerFullReconcilesPartialDiffs(t *testing.T) {
	prev := snap(dnsService(), endpoints("10.244.1.5:53"))
	cur := snap(dnsService(), endpoints("10.244.2.7:53"))
	ct := &fakeCT{entries: []Entry{{Protocol: v1.ProtocolUDP, OrigDst: netip.MustParseAddr("10.96.0.10"), OrigDstPort: 53, ReplySrc: netip.MustParseAddr("10.244.1.5"), ReplySrcPort: 53}}}
	n := 0
	c := &Cleaner{CT: ct, OnDeleted: func(d int) { n += d }}
	if err := c.AfterSync(context.Background(), nil, cur, changedDNS(), true); err != nil {
		t.Fatal(err)
	}
	if want := []string{"udp orig-dst=10.96.0.10 orig-port-dst=53 reply-src=10.244.1.5 reply-port-src=53"}; !slices.Equal(ct.deleted, want) || n != 1 {
		t.Errorf("full: got %q (%d), want %q", ct.deleted, n, want)
	}
	ct.deleted = nil
	if err := c.AfterSync(context.Background(), prev, cur, changedDNS(), false); err != nil {
		t.Fatal(err)
	}
	if len(ct.deleted) != 4 {
		t.Errorf("partial: got %q, want the 4 filters of the removed endpoint", ct.deleted)
	}
}
