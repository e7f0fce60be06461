// Package nodeaddr holds the one rule by which Portal picks the addresses
// that stand for nodes to the outside: the ExternalIP addresses, or the
// InternalIP ones when there is no ExternalIP, as k3s's ServiceLB and
// ingress-nginx pick them. servicelb gives them to LoadBalancer Services
// and ingress/status publishes them in Ingress status; one rule keeps the
// two showing the same address for the same node.
//
// The package only reads Node objects; which nodes count is the caller's
// choice.
package nodeaddr

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Preferred returns the ExternalIP addresses of nodes if any of them has
// one, else their InternalIP addresses; sorted, IPv4-mapped IPv6
// addresses unmapped, without duplicates. Entries that are not IP
// addresses are skipped.
func Preferred(nodes ...*corev1.Node) []netip.Addr {
	var external, internal []netip.Addr
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			switch a.Type {
			case corev1.NodeExternalIP:
				external = append(external, ip.Unmap())
			case corev1.NodeInternalIP:
				internal = append(internal, ip.Unmap())
			}
		}
	}
	out := internal
	if len(external) > 0 {
		out = external
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
