package proxy

import (
	"net"
	"net/netip"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"

	"portal.dev/portal/proxy/leftovers"
	"portal.dev/portal/proxy/snapshot"
)

// toBeDeletedTaint is the taint the cluster autoscaler puts on a node it
// is about to remove; kube-proxy fails /healthz on such nodes.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// nodeTracker holds this node's Node object, which may not exist (Portal's
// node agent arrives later, and a proxy can run on a machine that is not
// a node at all).
type nodeTracker struct {
	mu   sync.Mutex
	node *v1.Node
}

func (t *nodeTracker) set(n *v1.Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.node = n
}

func (t *nodeTracker) get() *v1.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.node
}

// localAddrs lists the addresses of the local interfaces, loopback and
// link-local excluded, and so are the Service addresses userspace mode
// puts on its VIP link: they are not the node's (NodePorts must not listen
// on them), and counting them would make every new Service a node change.
func localAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := nodeAddrs(addrs)
	vip, err := net.InterfaceByName(leftovers.VIPLink)
	if err != nil {
		return out, nil // no VIP link: nothing to leave out
	}
	vipAddrs, err := vip.Addrs()
	if err != nil {
		return nil, err
	}
	skip := nodeAddrs(vipAddrs)
	return slices.DeleteFunc(out, func(a netip.Addr) bool {
		_, found := slices.BinarySearchFunc(skip, a, netip.Addr.Compare)
		return found
	}), nil
}

// nodeAddrs keeps the addresses that can be a node's: sorted, once each.
func nodeAddrs(addrs []net.Addr) []netip.Addr {
	var out []netip.Addr
	for _, ia := range addrs {
		ipn, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		a = a.Unmap()
		if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// buildNode returns the snapshot's view of this node from its Node
// object (nil when there is none) and the local addresses.
func buildNode(name string, n *v1.Node, local []netip.Addr, spec nodePortSpec) *snapshot.Node {
	out := &snapshot.Node{Name: name, Eligible: true}
	if n != nil {
		out.Zone = n.Labels[v1.LabelTopologyZone]
		for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
			for _, a := range n.Status.Addresses {
				if a.Type != typ {
					continue
				}
				if ip, err := netip.ParseAddr(a.Address); err == nil && !slices.Contains(out.Addresses, ip.Unmap()) {
					out.Addresses = append(out.Addresses, ip.Unmap())
				}
			}
		}
		if n.DeletionTimestamp != nil {
			out.Eligible = false
		}
		for _, t := range n.Spec.Taints {
			if t.Key == toBeDeletedTaint {
				out.Eligible = false
			}
		}
	}
	if len(out.Addresses) == 0 {
		out.Addresses = local
	}
	switch {
	case spec.all:
		out.NodePorts = snapshot.NodePortAddresses{All: true, Addrs: local}
	case spec.primary:
		// The node's first address of each family.
		var v4, v6 bool
		for _, a := range out.Addresses {
			if a.Is4() && !v4 {
				v4 = true
				out.NodePorts.Addrs = append(out.NodePorts.Addrs, a)
			} else if a.Is6() && !v6 {
				v6 = true
				out.NodePorts.Addrs = append(out.NodePorts.Addrs, a)
			}
		}
	default:
		for _, a := range local {
			for _, p := range spec.cidrs {
				if p.Contains(a) {
					out.NodePorts.Addrs = append(out.NodePorts.Addrs, a)
					break
				}
			}
		}
	}
	return out
}
