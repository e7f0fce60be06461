package conntrack

import (
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

var families = []snapshot.Family{v1.IPv4Protocol, v1.IPv6Protocol}

// frontend is one way into a UDP Service port in one family.
type frontend struct {
	addrs    []netip.Addr // cluster IP, externalIPs, load balancer VIPs
	port     uint16
	nodePort uint16
	serving  map[netip.AddrPort]struct{}
}

// frontends returns, per port key, the UDP frontends of svc in family f
// and the endpoints serving them (ready, or serving while terminating:
// flows to those are kept, as for TCP). Traffic policies and topology do
// not matter: they choose endpoints for new flows, not old ones.
func frontends(svc *snapshot.Service, eps *snapshot.ServiceEndpoints, f snapshot.Family) map[snapshot.PortKey]*frontend {
	if svc == nil {
		return nil
	}
	cip, ok := svc.ClusterIP(f)
	if !ok {
		return nil
	}
	out := map[snapshot.PortKey]*frontend{}
	for _, p := range svc.Ports {
		if p.Protocol != v1.ProtocolUDP {
			continue
		}
		fe := &frontend{port: p.Port, nodePort: p.NodePort, serving: map[netip.AddrPort]struct{}{}}
		fe.addrs = append(fe.addrs, cip)
		fe.addrs = append(fe.addrs, svc.ExternalIPsOf(f)...)
		fe.addrs = append(fe.addrs, svc.LoadBalancerVIPsOf(f)...)
		for _, e := range snapshot.OfFamily(eps.For(p.Key()), f) {
			if e.Ready || e.Serving {
				fe.serving[e.AddrPort()] = struct{}{}
			}
		}
		out[p.Key()] = fe
	}
	return out
}

// Changes returns the deletions that make UDP flows follow the changes
// from prev (the last programmed snapshot; nil after a restart) to cur
// for the Services in changed. Call it after the new rules are in place,
// so a deleted entry is recreated by the new rules.
//
//   - An endpoint that stopped serving a port loses the flows DNATed to
//     it through every frontend of that port: cluster IP (19029), NodePort,
//     externalIP and load balancer VIP (59368), also when no endpoint is
//     left (139628).
//   - A frontend that starts having endpoints loses its entries that were
//     not DNATed (reply source = the frontend itself): those were created
//     while nothing could answer and would keep the flow away from the new
//     endpoint (48370). Only those: after a restart every frontend looks
//     new, and DNATed flows to endpoints that still serve must survive
//     that (122740).
func Changes(prev, cur *snapshot.Snapshot, changed map[types.NamespacedName]struct{}) []Filter {
	var out []Filter
	for nn := range changed {
		for _, f := range families {
			var before, after map[snapshot.PortKey]*frontend
			if prev != nil {
				before = frontends(prev.Services[nn], prev.Endpoints[nn], f)
			}
			after = frontends(cur.Services[nn], cur.Endpoints[nn], f)
			for key, old := range before {
				now := after[key]
				for ep := range old.serving {
					if now != nil {
						if _, still := now.serving[ep]; still {
							continue
						}
					}
					for _, a := range old.addrs {
						out = append(out, Filter{Family: f, Protocol: v1.ProtocolUDP, OrigDst: a, OrigDstPort: old.port, ReplySrc: ep.Addr(), ReplySrcPort: ep.Port()})
					}
					if old.nodePort != 0 {
						out = append(out, Filter{Family: f, Protocol: v1.ProtocolUDP, OrigDstPort: old.nodePort, ReplySrc: ep.Addr(), ReplySrcPort: ep.Port()})
					}
				}
			}
			for key, now := range after {
				if len(now.serving) == 0 {
					continue
				}
				old := before[key]
				wasActive := old != nil && len(old.serving) > 0
				for _, a := range now.addrs {
					if wasActive && old.port == now.port && slices.Contains(old.addrs, a) {
						continue
					}
					out = append(out, Filter{Family: f, Protocol: v1.ProtocolUDP, OrigDst: a, OrigDstPort: now.port, ReplySrc: a})
				}
				if now.nodePort != 0 && !(wasActive && old.nodePort == now.nodePort) {
					for _, a := range nodeAddrs(cur.Node, f) {
						out = append(out, Filter{Family: f, Protocol: v1.ProtocolUDP, OrigDst: a, OrigDstPort: now.nodePort, ReplySrc: a})
					}
				}
			}
		}
	}
	return sortFilters(out)
}

// Reconcile returns deletions for listed entries (UDP, one family) that
// no longer fit cur: entries to a frontend whose reply does not come from
// an endpoint serving it. It is what Changes does, computed from the
// table itself, so it also catches what changed while the proxy was down.
func Reconcile(entries []Entry, cur *snapshot.Snapshot, f snapshot.Family) []Filter {
	byAddr := map[netip.AddrPort]map[netip.AddrPort]struct{}{}
	byNodePort := map[uint16]map[netip.AddrPort]struct{}{}
	for nn, svc := range cur.Services {
		for _, fe := range frontends(svc, cur.Endpoints[nn], f) {
			for _, a := range fe.addrs {
				byAddr[netip.AddrPortFrom(a, fe.port)] = fe.serving
			}
			if fe.nodePort != 0 {
				byNodePort[fe.nodePort] = fe.serving
			}
		}
	}
	local := map[netip.Addr]struct{}{}
	for _, a := range nodeAddrs(cur.Node, f) {
		local[a] = struct{}{}
	}
	seen := map[Filter]struct{}{}
	var out []Filter
	for _, e := range entries {
		if e.Protocol != v1.ProtocolUDP {
			continue
		}
		dst := netip.AddrPortFrom(e.OrigDst, e.OrigDstPort)
		reply := netip.AddrPortFrom(e.ReplySrc, e.ReplySrcPort)
		serving, ok := byAddr[dst]
		if !ok {
			if _, isLocal := local[e.OrigDst]; isLocal {
				serving, ok = byNodePort[e.OrigDstPort]
			}
		}
		if !ok {
			continue
		}
		if _, fine := serving[reply]; fine {
			continue
		}
		flt := Filter{Family: f, Protocol: v1.ProtocolUDP, OrigDst: e.OrigDst, OrigDstPort: e.OrigDstPort, ReplySrc: e.ReplySrc, ReplySrcPort: e.ReplySrcPort}
		if _, dup := seen[flt]; !dup {
			seen[flt] = struct{}{}
			out = append(out, flt)
		}
	}
	return sortFilters(out)
}

// nodeAddrs returns the addresses NodePorts answer on in family f.
func nodeAddrs(n *snapshot.Node, f snapshot.Family) []netip.Addr {
	if n == nil {
		return nil
	}
	if addrs := n.NodePorts.Of(f); len(addrs) > 0 {
		return addrs
	}
	var out []netip.Addr
	for _, a := range n.Addresses {
		if snapshot.FamilyOf(a) == f {
			out = append(out, a)
		}
	}
	return out
}

func sortFilters(fs []Filter) []Filter {
	slices.SortFunc(fs, func(a, b Filter) int { return strings.Compare(a.String(), b.String()) })
	return slices.CompactFunc(fs, func(a, b Filter) bool { return a == b })
}
