package snapshot

import "slices"

// Policy is what endpoint selection needs to know about a Service port.
type Policy struct {
	InternalLocal bool
	ExternalLocal bool
	// ExternallyAccessible: the port has a NodePort, externalIP or load
	// balancer VIP in the family being selected for.
	ExternallyAccessible bool
}

// PolicyOf returns the selection policy of port p of s in family f.
func PolicyOf(s *Service, p Port, f Family) Policy {
	return Policy{
		InternalLocal:        s.InternalPolicyLocal,
		ExternalLocal:        s.ExternalPolicyLocal,
		ExternallyAccessible: s.ExternallyAccessible(p, f),
	}
}

// UsesCluster reports whether some traffic goes to endpoints chosen by the
// Cluster policy. External traffic needs them even with policy Local,
// because traffic from pods and from the node itself to an external
// address short-circuits to the cluster endpoints.
func (p Policy) UsesCluster() bool { return !p.InternalLocal || p.ExternallyAccessible }

// UsesLocal reports whether some traffic goes only to this node's endpoints.
func (p Policy) UsesLocal() bool {
	return p.InternalLocal || (p.ExternalLocal && p.ExternallyAccessible)
}

// Selection is the outcome of endpoint selection for one Service port.
type Selection struct {
	// Cluster are the endpoints for Cluster-policy traffic (topology
	// applied); nil when the port never uses them.
	Cluster []*Endpoint
	// Local are this node's endpoints for Local-policy traffic; nil when
	// the port never uses them.
	Local []*Endpoint
	// HasAny reports usable endpoints anywhere in the cluster, even if
	// none is reachable from this node under the port's policies: it
	// decides between rejecting (no endpoints at all) and dropping (none
	// here).
	HasAny bool
}

// Internal returns the endpoints for traffic to the cluster IP.
func (s Selection) Internal(p Policy) []*Endpoint {
	if p.InternalLocal {
		return s.Local
	}
	return s.Cluster
}

// External returns the endpoints for traffic from outside the cluster to
// a NodePort, externalIP or load balancer VIP.
func (s Selection) External(p Policy) []*Endpoint {
	if p.ExternalLocal {
		return s.Local
	}
	return s.Cluster
}

// Select picks the usable endpoints of a Service port, as kube-proxy
// does. Usable means ready; when none is ready, serving-and-terminating
// endpoints stand in (separately for the Cluster and the Local lists), so
// a rolling update never leaves a gap. The Cluster list honours topology:
// when every ready endpoint carries node hints and one is for this node,
// only those; otherwise when every ready endpoint carries zone hints and
// one is for this zone, only those; otherwise all. eps must be of one
// family and is not modified; the returned lists keep its order.
func Select(eps []*Endpoint, p Policy, node *Node) Selection {
	var sel Selection
	if len(eps) == 0 {
		return sel
	}
	var nodeName, zone string
	if node != nil {
		nodeName, zone = node.Name, node.Zone
	}
	topology := topologyNone
	if p.UsesCluster() {
		topology = topologyFromHints(eps, nodeName, zone)
		sel.Cluster = filter(eps, func(e *Endpoint) bool {
			return e.Ready && topology.allows(e, nodeName, zone)
		})
		// Topology is ignored when no ready endpoint matches it, so an
		// empty list here means nothing is ready anywhere.
		if len(sel.Cluster) == 0 {
			sel.Cluster = filter(eps, servingTerminating)
		}
		sel.HasAny = len(sel.Cluster) > 0
	}
	if !p.UsesLocal() {
		return sel
	}
	var localReady, localTerminating bool
	for _, e := range eps {
		switch {
		case e.Ready:
			sel.HasAny = true
			localReady = localReady || e.Local
		case servingTerminating(e):
			sel.HasAny = true
			localTerminating = localTerminating || e.Local
		}
	}
	switch {
	case localReady:
		sel.Local = filter(eps, func(e *Endpoint) bool { return e.Local && e.Ready })
	case localTerminating:
		sel.Local = filter(eps, func(e *Endpoint) bool { return e.Local && servingTerminating(e) })
	default:
		sel.Local = []*Endpoint{}
	}
	return sel
}

func servingTerminating(e *Endpoint) bool { return e.Serving && e.Terminating }

type topologyMode int

const (
	topologyNone topologyMode = iota
	topologySameZone
	topologySameNode
)

func (m topologyMode) allows(e *Endpoint, nodeName, zone string) bool {
	switch m {
	case topologySameNode:
		return slices.Contains(e.NodeHints, nodeName)
	case topologySameZone:
		return slices.Contains(e.ZoneHints, zone)
	}
	return true
}

// topologyFromHints decides whether the hints the EndpointSlice
// controller wrote (for trafficDistribution PreferSameNode, PreferSameZone
// or PreferClose, or topology-aware routing) apply on this node: only when
// every ready endpoint carries them, so a half-hinted slice never strands
// traffic, and at least one is for us.
func topologyFromHints(eps []*Endpoint, nodeName, zone string) topologyMode {
	anyReady := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		anyReady = true
		if len(e.NodeHints) == 0 {
			allNode = false
		} else if nodeName != "" && slices.Contains(e.NodeHints, nodeName) {
			forNode = true
		}
		if len(e.ZoneHints) == 0 {
			allZone = false
		} else if zone != "" && slices.Contains(e.ZoneHints, zone) {
			forZone = true
		}
	}
	switch {
	case !anyReady:
		return topologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

func filter(eps []*Endpoint, keep func(*Endpoint) bool) []*Endpoint {
	out := make([]*Endpoint, 0, len(eps))
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// OfFamily returns the endpoints of family f, reusing eps when all are.
func OfFamily(eps []*Endpoint, f Family) []*Endpoint {
	n := 0
	for _, e := range eps {
		if e.Family() == f {
			n++
		}
	}
	if n == len(eps) {
		return eps
	}
	out := make([]*Endpoint, 0, n)
	for _, e := range eps {
		if e.Family() == f {
			out = append(out, e)
		}
	}
	return out
}

// LocalReadyCount returns how many distinct local, ready endpoint
// addresses serve any port of the Service: the count a healthCheckNodePort
// reports to load balancers.
func LocalReadyCount(eps *ServiceEndpoints) int {
	if eps == nil {
		return 0
	}
	seen := map[string]struct{}{}
	for _, list := range eps.ByPort {
		for _, e := range list {
			if e.Local && e.Ready {
				seen[e.Addr.String()] = struct{}{}
			}
		}
	}
	return len(seen)
}
