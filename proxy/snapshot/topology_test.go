package snapshot

import (
	"net/netip"
	"strings"
	"testing"
)

// e builds an endpoint from "ip" and flags: local, unready, terminating
// (serving), terminating-unserving, zone=Z (hint), node=N (hint).
func e(ip string, flags ...string) *Endpoint {
	ep := &Endpoint{Addr: netip.MustParseAddr(ip), Port: 80, Ready: true, Serving: true, NodeName: "other"}
	for _, f := range flags {
		switch {
		case f == "local":
			ep.Local, ep.NodeName = true, "node1"
		case f == "unready":
			ep.Ready, ep.Serving = false, false
		case f == "terminating":
			ep.Ready, ep.Serving, ep.Terminating = false, true, true
		case f == "terminating-unserving":
			ep.Ready, ep.Serving, ep.Terminating = false, false, true
		case strings.HasPrefix(f, "zone="):
			ep.ZoneHints = append(ep.ZoneHints, strings.TrimPrefix(f, "zone="))
		case strings.HasPrefix(f, "node="):
			ep.NodeHints = append(ep.NodeHints, strings.TrimPrefix(f, "node="))
		}
	}
	return ep
}

func ips(eps []*Endpoint) string {
	if eps == nil {
		return "nil"
	}
	var s []string
	for _, ep := range eps {
		s = append(s, ep.Addr.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestSelect(t *testing.T) {
	node := &Node{Name: "node1", Zone: "zone-a"}
	cluster := Policy{}
	internalLocal := Policy{InternalLocal: true}
	externalLocal := Policy{ExternalLocal: true, ExternallyAccessible: true}
	bothLocal := Policy{InternalLocal: true, ExternalLocal: true, ExternallyAccessible: true}
	tests := []struct {
		name        string
		policy      Policy
		node        *Node
		eps         []*Endpoint
		wantCluster string
		wantLocal   string
		wantAny     bool
	}{
		{"no endpoints", cluster, node, nil, "nil", "nil", false},
		{"ready endpoints only", cluster, node, []*Endpoint{e("10.0.0.1"), e("10.0.0.2", "unready"), e("10.0.0.3", "terminating")}, "[10.0.0.1]", "nil", true},
		{"none ready: serving terminating stand in", cluster, node, []*Endpoint{e("10.0.0.2", "unready"), e("10.0.0.3", "terminating"), e("10.0.0.4", "terminating-unserving")}, "[10.0.0.3]", "nil", true},
		{"nothing usable", cluster, node, []*Endpoint{e("10.0.0.2", "unready"), e("10.0.0.4", "terminating-unserving")}, "[]", "nil", false},
		{"internal Local: this node's only", internalLocal, node, []*Endpoint{e("10.0.0.1", "local"), e("10.0.0.2")}, "nil", "[10.0.0.1]", true},
		{"internal Local, none here: still HasAny so traffic is dropped, not rejected", internalLocal, node, []*Endpoint{e("10.0.0.2")}, "nil", "[]", true},
		{"internal Local: local terminating fallback", internalLocal, node, []*Endpoint{e("10.0.0.1", "local", "terminating"), e("10.0.0.2")}, "nil", "[10.0.0.1]", true},
		{"internal Local: a ready local wins over terminating", internalLocal, node, []*Endpoint{e("10.0.0.1", "local", "terminating"), e("10.0.0.5", "local")}, "nil", "[10.0.0.5]", true},
		{"external Local uses both lists (short-circuit needs Cluster)", externalLocal, node, []*Endpoint{e("10.0.0.1", "local"), e("10.0.0.2")}, "[10.0.0.1 10.0.0.2]", "[10.0.0.1]", true},
		{"external Local, no local endpoints", externalLocal, node, []*Endpoint{e("10.0.0.2")}, "[10.0.0.2]", "[]", true},
		{"both Local", bothLocal, node, []*Endpoint{e("10.0.0.1", "local"), e("10.0.0.2")}, "[10.0.0.1 10.0.0.2]", "[10.0.0.1]", true},
		{"Local policy, only terminating endpoints elsewhere", internalLocal, node, []*Endpoint{e("10.0.0.2", "terminating")}, "nil", "[]", true},
		{"zone hints for our zone", cluster, node, []*Endpoint{e("10.0.0.1", "zone=zone-a"), e("10.0.0.2", "zone=zone-b")}, "[10.0.0.1]", "nil", true},
		{"zone hints, none for our zone: all", cluster, node, []*Endpoint{e("10.0.0.1", "zone=zone-b"), e("10.0.0.2", "zone=zone-c")}, "[10.0.0.1 10.0.0.2]", "nil", true},
		{"zone hints on some endpoints only: ignored", cluster, node, []*Endpoint{e("10.0.0.1", "zone=zone-a"), e("10.0.0.2")}, "[10.0.0.1 10.0.0.2]", "nil", true},
		{"unready endpoints' missing hints do not matter", cluster, node, []*Endpoint{e("10.0.0.1", "zone=zone-a"), e("10.0.0.2", "zone=zone-b"), e("10.0.0.3", "unready")}, "[10.0.0.1]", "nil", true},
		{"node without zone ignores zone hints", cluster, &Node{Name: "node1"}, []*Endpoint{e("10.0.0.1", "zone=zone-a"), e("10.0.0.2", "zone=zone-b")}, "[10.0.0.1 10.0.0.2]", "nil", true},
		{"PreferSameNode: node hints win over zone hints", cluster, node, []*Endpoint{e("10.0.0.1", "node=node1", "zone=zone-a"), e("10.0.0.2", "node=node2", "zone=zone-a")}, "[10.0.0.1]", "nil", true},
		{"PreferSameNode, none for us: fall back to zone", cluster, node, []*Endpoint{e("10.0.0.1", "node=node3", "zone=zone-a"), e("10.0.0.2", "node=node2", "zone=zone-b")}, "[10.0.0.1]", "nil", true},
		{"topology hints but nothing ready: terminating fallback ignores hints", cluster, node, []*Endpoint{e("10.0.0.1", "terminating", "zone=zone-b"), e("10.0.0.2", "terminating", "zone=zone-a")}, "[10.0.0.1 10.0.0.2]", "nil", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel := Select(tc.eps, tc.policy, tc.node)
			if got := ips(sel.Cluster); got != tc.wantCluster {
				t.Errorf("Cluster: got %s, want %s", got, tc.wantCluster)
			}
			if got := ips(sel.Local); got != tc.wantLocal {
				t.Errorf("Local: got %s, want %s", got, tc.wantLocal)
			}
			if sel.HasAny != tc.wantAny {
				t.Errorf("HasAny: got %v, want %v", sel.HasAny, tc.wantAny)
			}
		})
	}
}

func TestSelectionInternalExternal(t *testing.T) {
	sel := Selection{Cluster: []*Endpoint{e("10.0.0.1"), e("10.0.0.2", "local")}, Local: []*Endpoint{e("10.0.0.2", "local")}}
	for _, tc := range []struct {
		name               string
		p                  Policy
		internal, external string
	}{
		{"Cluster/Cluster", Policy{}, "[10.0.0.1 10.0.0.2]", "[10.0.0.1 10.0.0.2]"},
		{"Local/Cluster", Policy{InternalLocal: true}, "[10.0.0.2]", "[10.0.0.1 10.0.0.2]"},
		{"Cluster/Local", Policy{ExternalLocal: true}, "[10.0.0.1 10.0.0.2]", "[10.0.0.2]"},
	} {
		if got := ips(sel.Internal(tc.p)); got != tc.internal {
			t.Errorf("%s internal: got %s, want %s", tc.name, got, tc.internal)
		}
		if got := ips(sel.External(tc.p)); got != tc.external {
			t.Errorf("%s external: got %s, want %s", tc.name, got, tc.external)
		}
	}
}

func TestOfFamilyAndLocalReadyCount(t *testing.T) {
	eps := []*Endpoint{e("10.0.0.1", "local"), e("fd00::1", "local"), e("10.0.0.2")}
	if got := ips(OfFamily(eps, "IPv6")); got != "[fd00::1]" {
		t.Errorf("OfFamily IPv6: got %s", got)
	}
	all4 := []*Endpoint{e("10.0.0.1")}
	if got := OfFamily(all4, "IPv4"); &got[0] != &all4[0] {
		t.Error("OfFamily copied a single-family list")
	}
	se := &ServiceEndpoints{ByPort: map[PortKey][]*Endpoint{
		{Name: "a"}: {e("10.0.0.1", "local"), e("10.0.0.3", "local", "unready"), e("10.0.0.2")},
		{Name: "b"}: {e("10.0.0.1", "local"), e("fd00::1", "local")},
	}}
	if got := LocalReadyCount(se); got != 2 {
		t.Errorf("LocalReadyCount: got %d, want 2 (10.0.0.1 counted once, fd00::1)", got)
	}
	if got := LocalReadyCount(nil); got != 0 {
		t.Errorf("LocalReadyCount(nil): got %d", got)
	}
}
