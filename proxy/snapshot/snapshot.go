// Package snapshot holds the proxy's model of the cluster: slim, immutable
// views of Services, their endpoints and this node, and the endpoint
// selection every proxy mode shares (readiness, terminating fallback,
// traffic policies, topology). It is pure data and pure functions: it owns
// no client, no socket and no kernel state, and a Snapshot is never changed
// once built, so a mode may keep one as long as it likes.
package snapshot

import (
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Snapshot is everything a proxy mode needs for one sync. Its maps and the
// values they point to are shared with later snapshots and must not be
// modified.
type Snapshot struct {
	// Services holds every proxied Service: ExternalName and headless
	// Services, and Services without a cluster IP, are left out.
	Services map[types.NamespacedName]*Service
	// Endpoints holds the merged EndpointSlices of each Service that has
	// any; a Service may have endpoints before it exists and vice versa.
	Endpoints map[types.NamespacedName]*ServiceEndpoints
	// Node is this node as far as the proxy knows it.
	Node *Node
}

// ServiceEndpoints are the endpoints of one Service, by port.
type ServiceEndpoints struct {
	ByPort map[PortKey][]*Endpoint
}

// For returns the endpoints of port p (nil when there are none).
func (e *ServiceEndpoints) For(p PortKey) []*Endpoint {
	if e == nil {
		return nil
	}
	return e.ByPort[p]
}

// PortKey names a port within a Service the way EndpointSlices do: by
// port name and protocol.
type PortKey struct {
	Name     string
	Protocol v1.Protocol
}

// SchedulerAnnotation on a Service chooses the userspace mode's scheduler
// for it (rr, random, lc, sh, dh, sed, nq, maglev).
const SchedulerAnnotation = "portal.dev/scheduler"

// Service is the part of a v1.Service the proxy uses.
type Service struct {
	Name types.NamespacedName
	// ClusterIPs has at most one address per family.
	ClusterIPs  []netip.Addr
	ExternalIPs []netip.Addr
	// LoadBalancerVIPs are the status ingress IPs whose ipMode is VIP or
	// unset; Proxy-mode ingress points are not intercepted.
	LoadBalancerVIPs []netip.Addr
	// SourceRanges are loadBalancerSourceRanges; empty allows everyone.
	SourceRanges []netip.Prefix
	// AffinityTimeout is the ClientIP session affinity timeout; zero
	// means no affinity.
	AffinityTimeout time.Duration
	// ExternalPolicyLocal is externalTrafficPolicy Local on a Service
	// that accepts external traffic at all.
	ExternalPolicyLocal bool
	// InternalPolicyLocal is internalTrafficPolicy Local.
	InternalPolicyLocal bool
	// HealthCheckNodePort is set for LoadBalancer Services with
	// externalTrafficPolicy Local.
	HealthCheckNodePort int32
	// Scheduler is the portal.dev/scheduler annotation: the userspace
	// mode's load-balancing algorithm for this Service ("" = the default).
	Scheduler string
	Ports     []Port
}

// Port is one Service port.
type Port struct {
	Name     string
	Protocol v1.Protocol
	Port     uint16
	NodePort uint16
}

// Key returns the key endpoints of this port are stored under.
func (p Port) Key() PortKey { return PortKey{Name: p.Name, Protocol: p.Protocol} }

// Family is an IP family, v1.IPv4Protocol or v1.IPv6Protocol.
type Family = v1.IPFamily

// FamilyOf returns the family of a.
func FamilyOf(a netip.Addr) Family {
	if a.Is4() || a.Is4In6() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// ClusterIP returns the Service's cluster IP of family f, if it has one.
func (s *Service) ClusterIP(f Family) (netip.Addr, bool) {
	for _, a := range s.ClusterIPs {
		if FamilyOf(a) == f {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// ExternalIPsOf returns the externalIPs of family f.
func (s *Service) ExternalIPsOf(f Family) []netip.Addr { return addrsOf(s.ExternalIPs, f) }

// LoadBalancerVIPsOf returns the load balancer VIPs of family f.
func (s *Service) LoadBalancerVIPsOf(f Family) []netip.Addr { return addrsOf(s.LoadBalancerVIPs, f) }

// SourceRangesOf returns the loadBalancerSourceRanges of family f.
func (s *Service) SourceRangesOf(f Family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.SourceRanges {
		if FamilyOf(p.Addr()) == f {
			out = append(out, p)
		}
	}
	return out
}

// ExternallyAccessible reports whether port p of the Service takes
// traffic other than to its cluster IP in family f: a NodePort, an
// externalIP or a load balancer VIP.
func (s *Service) ExternallyAccessible(p Port, f Family) bool {
	return p.NodePort != 0 || len(s.ExternalIPsOf(f)) > 0 || len(s.LoadBalancerVIPsOf(f)) > 0
}

func addrsOf(addrs []netip.Addr, f Family) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if FamilyOf(a) == f {
			out = append(out, a)
		}
	}
	return out
}

// Endpoint is one address and port of a Service port.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
	// Ready, Serving and Terminating are the EndpointSlice conditions,
	// with the API's defaults applied (nil Ready means ready, nil Serving
	// means the same as Ready).
	Ready       bool
	Serving     bool
	Terminating bool
	// NodeName is the endpoint's node, "" when the slice does not say.
	NodeName string
	// Local is true when NodeName is this node.
	Local bool
	// ZoneHints and NodeHints are the topology hints (forZones, forNodes).
	ZoneHints []string
	NodeHints []string
}

// AddrPort returns the endpoint's address and port.
func (e *Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.Addr, e.Port) }

// String returns "ip:port" ("[ip]:port" for IPv6).
func (e *Endpoint) String() string { return e.AddrPort().String() }

// Family returns the endpoint's IP family.
func (e *Endpoint) Family() Family { return FamilyOf(e.Addr) }

// Node is this node: its name, zone and addresses.
type Node struct {
	Name string
	// Zone is the topology.kubernetes.io/zone label ("" when unknown).
	Zone string
	// Addresses are the node's IPs: from its Node object when there is
	// one, otherwise the local interfaces' addresses (loopback excluded).
	Addresses []netip.Addr
	// NodePorts says which local addresses accept NodePort traffic.
	NodePorts NodePortAddresses
	// Eligible is false when the node is being deleted or is tainted for
	// deletion; /healthz then fails so load balancers drain it.
	Eligible bool
}

// NodePortAddresses says which local addresses accept NodePort traffic.
type NodePortAddresses struct {
	// All means every local address except loopback.
	All bool
	// Addrs are the addresses when All is false; with All they list the
	// local addresses known at the time, for uses (conntrack, health
	// check listeners) that need them spelled out.
	Addrs []netip.Addr
}

// Of returns the addresses of family f.
func (n NodePortAddresses) Of(f Family) []netip.Addr { return addrsOf(n.Addrs, f) }

// Request asks a proxy mode to program one snapshot.
type Request struct {
	Snapshot *Snapshot
	// Changed lists every Service whose ports or endpoints differ from the
	// snapshot of the last successful sync. With Full it lists them too,
	// but the mode must rewrite everything anyway.
	Changed map[types.NamespacedName]struct{}
	// Full asks the mode to rewrite everything it owns rather than only
	// what changed: on the first sync, after a failed one, when the node
	// changed, and periodically to repair drift.
	Full bool
}
