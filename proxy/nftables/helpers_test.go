//go:build linux

package nftables

import (
	"context"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/snapshot"
)

// The helpers below build snapshots tersely: svc("ns/name", ...) and
// eps("ns/name", ...) with options.

type svcOpt func(*snapshot.Service)

func svc(name string, clusterIPs string, opts ...svcOpt) *snapshot.Service {
	ns, n, _ := strings.Cut(name, "/")
	s := &snapshot.Service{Name: types.NamespacedName{Namespace: ns, Name: n}}
	for _, ip := range strings.Split(clusterIPs, ",") {
		s.ClusterIPs = append(s.ClusterIPs, netip.MustParseAddr(ip))
	}
	for _, o := range opts {
		o(s)
	}
	if len(s.Ports) == 0 {
		s.Ports = []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
	}
	return s
}

func port(name string, proto v1.Protocol, p, nodePort uint16) svcOpt {
	return func(s *snapshot.Service) {
		s.Ports = append(s.Ports, snapshot.Port{Name: name, Protocol: proto, Port: p, NodePort: nodePort})
	}
}

func externalIPs(ips ...string) svcOpt {
	return func(s *snapshot.Service) {
		for _, ip := range ips {
			s.ExternalIPs = append(s.ExternalIPs, netip.MustParseAddr(ip))
		}
	}
}

func lbVIPs(ips ...string) svcOpt {
	return func(s *snapshot.Service) {
		for _, ip := range ips {
			s.LoadBalancerVIPs = append(s.LoadBalancerVIPs, netip.MustParseAddr(ip))
		}
	}
}

func sourceRanges(cidrs ...string) svcOpt {
	return func(s *snapshot.Service) {
		for _, c := range cidrs {
			s.SourceRanges = append(s.SourceRanges, netip.MustParsePrefix(c))
		}
	}
}

func affinity(d time.Duration) svcOpt {
	return func(s *snapshot.Service) { s.AffinityTimeout = d }
}

func externalLocal(s *snapshot.Service) { s.ExternalPolicyLocal = true }
func internalLocal(s *snapshot.Service) { s.InternalPolicyLocal = true }

// ep describes an endpoint as "ip:port", with flags: "local",
// "unready", "terminating" (serving and terminating), "node=NAME".
func ep(addrPort string, flags ...string) *snapshot.Endpoint {
	ap := netip.MustParseAddrPort(addrPort)
	e := &snapshot.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true, NodeName: "other"}
	for _, f := range flags {
		switch {
		case f == "local":
			e.Local, e.NodeName = true, "node1"
		case f == "unready":
			e.Ready, e.Serving = false, false
		case f == "terminating":
			e.Ready, e.Serving, e.Terminating = false, true, true
		case strings.HasPrefix(f, "node="):
			e.NodeName = strings.TrimPrefix(f, "node=")
		}
	}
	return e
}

// endpointsFor builds a Service's endpoints on its port named portName (TCP).
func endpointsFor(portName string, proto v1.Protocol, list ...*snapshot.Endpoint) *snapshot.ServiceEndpoints {
	return &snapshot.ServiceEndpoints{ByPort: map[snapshot.PortKey][]*snapshot.Endpoint{{Name: portName, Protocol: proto}: list}}
}

func testNode() *snapshot.Node {
	return &snapshot.Node{Name: "node1", Eligible: true, NodePorts: snapshot.NodePortAddresses{All: true}}
}

type world struct {
	snap    *snapshot.Snapshot
	lastRun *snapshot.Snapshot
}

func newWorld() *world {
	return &world{snap: &snapshot.Snapshot{
		Services:  map[types.NamespacedName]*snapshot.Service{},
		Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{},
		Node:      testNode(),
	}}
}

// set replaces a Service and its endpoints (nil endpoints: none; nil
// svc: deleted) and returns its name for Changed.
func (w *world) set(s *snapshot.Service, e *snapshot.ServiceEndpoints) types.NamespacedName {
	next := &snapshot.Snapshot{Services: map[types.NamespacedName]*snapshot.Service{}, Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{}, Node: w.snap.Node}
	for k, v := range w.snap.Services {
		next.Services[k] = v
	}
	for k, v := range w.snap.Endpoints {
		next.Endpoints[k] = v
	}
	nn := s.Name
	next.Services[nn] = s
	if e == nil {
		delete(next.Endpoints, nn)
	} else {
		next.Endpoints[nn] = e
	}
	w.snap = next
	return nn
}

func (w *world) remove(nn types.NamespacedName) {
	next := &snapshot.Snapshot{Services: map[types.NamespacedName]*snapshot.Service{}, Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{}, Node: w.snap.Node}
	for k, v := range w.snap.Services {
		if k != nn {
			next.Services[k] = v
		}
	}
	for k, v := range w.snap.Endpoints {
		if k != nn {
			next.Endpoints[k] = v
		}
	}
	w.snap = next
}

func fullRequest(s *snapshot.Snapshot) snapshot.Request {
	return snapshot.Request{Snapshot: s, Full: true}
}

func partialRequest(s *snapshot.Snapshot, changed ...types.NamespacedName) snapshot.Request {
	m := map[types.NamespacedName]struct{}{}
	for _, nn := range changed {
		m[nn] = struct{}{}
	}
	return snapshot.Request{Snapshot: s, Changed: m}
}

func newFakeProxier(cfg Config) (*Proxier, *knftables.Fake, *knftables.Fake) {
	f4 := knftables.NewFake(knftables.IPv4Family, tableName)
	f6 := knftables.NewFake(knftables.IPv6Family, tableName)
	return NewWithInterfaces(cfg, f4, f6), f4, f6
}

func mustSync(t *testing.T, p *Proxier, req snapshot.Request) {
	t.Helper()
	if err := p.Sync(context.Background(), req); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// dumpLines returns the fake's ruleset without the static skeleton, so
// tests show only what a Service added.
func serviceLines(f *knftables.Fake) []string {
	var out []string
	for _, l := range strings.Split(f.Dump(), "\n") {
		if l == "" || isStaticLine(l) {
			continue
		}
		out = append(out, l)
	}
	return out
}

func isStaticLine(l string) bool {
	fields := strings.Fields(l)
	if len(fields) < 5 {
		return true
	}
	switch fields[1] {
	case "table":
		return true
	case "chain", "set", "map":
		return slices.Contains(staticNames, fields[4])
	case "rule":
		return slices.Contains(staticNames, fields[4])
	}
	return false
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func equalLines(a, b []string) bool { return slices.Equal(a, b) }

func mustContain(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing line %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

func mustNotContain(t *testing.T, got []string, sub string) {
	t.Helper()
	for _, l := range got {
		if strings.Contains(l, sub) {
			t.Errorf("unexpected %q in line %q", sub, l)
		}
	}
}

func countContaining(lines []string, sub string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// checkRefs fails the test if any rule or map element of the fake's
// table refers to a chain, set or map that does not exist: the kernel
// would refuse that, knftables' fake only checks at add time.
func checkRefs(t *testing.T, f *knftables.Fake) {
	t.Helper()
	if f.Table == nil {
		return
	}
	tbl := f.Table
	exists := func(name string) bool {
		return tbl.Chains[name] != nil || tbl.Sets[name] != nil || tbl.Maps[name] != nil
	}
	for cname, c := range tbl.Chains {
		for _, r := range c.Rules {
			words := strings.Fields(r.Rule)
			for i, w := range words {
				if (w == "goto" || w == "jump") && i+1 < len(words) && !exists(words[i+1]) {
					t.Errorf("chain %s: rule %q jumps to a missing chain", cname, r.Rule)
				}
				if strings.HasPrefix(w, "@") && !exists(w[1:]) {
					t.Errorf("chain %s: rule %q uses a missing set", cname, r.Rule)
				}
			}
		}
	}
	for mname, m := range tbl.Maps {
		for _, e := range m.Elements {
			words := strings.Fields(strings.Join(e.Value, " "))
			if len(words) == 2 && (words[0] == "goto" || words[0] == "jump") && !exists(words[1]) {
				t.Errorf("map %s: element %v goes to a missing chain", mname, e.Key)
			}
		}
	}
}

var (
	slotRule = regexp.MustCompile(`^(add rule \S+ portal (\S+) .*) offset (\d+) map @(` + endpointMapPrefix + `\S+)$`)
	slotElem = regexp.MustCompile(`^add element \S+ portal (` + endpointMapPrefix + `\S+) \{ (\d+) : (.*) \}$`)
	slotMap  = regexp.MustCompile(`^add map \S+ portal ` + endpointMapPrefix)
)

// canonicalDump is the fake's ruleset sorted, with each chain's slot
// range in the shared endpoint maps written as the chain's own: which
// ids chains got depends on the order they came in, so a table built by
// partial syncs and one built by a full sync differ there and nowhere
// else. A slot no rule points into stays as it is, and shows up in a
// comparison; empty endpoint maps are left out.
func canonicalDump(f *knftables.Fake) string {
	lines := strings.Split(f.Dump(), "\n")
	owner := map[string]string{} // "map offset" -> chain
	for _, l := range lines {
		if m := slotRule.FindStringSubmatch(l); m != nil {
			owner[m[4]+" "+m[3]] = m[2]
		}
	}
	var out []string
	for _, l := range lines {
		if m := slotRule.FindStringSubmatch(l); m != nil {
			l = m[1] + " map @slots-of-" + m[2]
		} else if m := slotElem.FindStringSubmatch(l); m != nil {
			k, _ := strconv.Atoi(m[2])
			base := k - k%maxEndpointsPerChain
			if c, ok := owner[m[1]+" "+strconv.Itoa(base)]; ok {
				l = "slot of " + c + " " + strconv.Itoa(k-base) + " : " + m[3]
			}
		} else if slotMap.MatchString(l) {
			continue
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
