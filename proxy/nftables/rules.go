package nftables

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// Names of the static objects in the portal table. Per-Service objects
// are named after "namespace/name/protocol/port"; Kubernetes names cannot
// contain "/", so those names cannot collide.
const (
	tableName = "portal"

	servicesChain      = "services"
	endpointsCheck     = "endpoints-check"
	firewallCheck      = "firewall-check"
	masqueradingChain  = "masquerading"
	rejectChain        = "reject-chain"
	serviceIPsMap      = "service-ips"
	serviceNodePorts   = "service-nodeports"
	noEndpointServices = "no-endpoint-services"
	noEndpointNodePort = "no-endpoint-nodeports"
	firewallIPsSet     = "firewall-ips"
	firewallAllowSet   = "firewall-allow"
	hairpinSet         = "hairpin"
	nodePortIPsSet     = "nodeport-ips"

	// masqueradeMark is the packet mark bit that asks the masquerading
	// chain to SNAT; the same bit kube-proxy uses, so tools that know it
	// (and CNI plugins that leave it alone) keep working.
	masqueradeMark = "0x00004000"

	// groupSize caps how many endpoints one chain chooses among. A
	// service chain picks an endpoint with a cascade of "numgen random mod
	// k" rules, one per endpoint (each rule matching with probability 1/k
	// of what is left gives a uniform choice); past groupSize endpoints it
	// first picks a group the same way, weighted by group size, so the
	// first packet of a connection walks O(sqrt n) rules, not O(n).
	groupSize = 32
)

// Why a cascade of rules and not a per-Service verdict map or DNAT map
// ("numgen random mod n vmap { ... }"), measured with nft 1.0.6 on
// kernel 6.18, 10,000 Services x 10 endpoints, full sync:
//
//   - an anonymous vmap per Service: 90 s. Every set of a table sits on a
//     list the kernel scans by name, and anonymous ones also get their
//     names allocated by a scan: O(n^2) in Services.
//   - a named DNAT map per Service: 5 s, for the same reason.
//   - one shared vmap or DNAT map that every Service's rule looks up:
//     minutes. Binding a map to a rule walks its elements, once per
//     referencing rule.
//   - this cascade: 3 s, nearly all of it nft parsing the text and the
//     kernel creating 110,000 rules. Chains are hashed by name, and each
//     shared map below is referenced by one rule.
//
// Every transaction that adds a rule makes the kernel re-validate all
// chains reachable from the base chains (twice here: prerouting and
// output both reach the Services), which is most of a partial sync's
// ~100 ms at that size; the Go side of it is ~10 us.

// elem is one element of a shared set or map.
type elem struct {
	container string // set or map name
	isMap     bool
	key       []string
	value     []string
}

func (e *elem) id() string {
	return e.container + "|" + strings.Join(e.key, " . ")
}

func (e *elem) valueString() string { return strings.Join(e.value, " ") }

// chain is one per-Service chain and its rules, in order.
type chain struct {
	name  string
	rules []string
}

// affinitySet is a per-endpoint set of client addresses that recently
// reached that endpoint through a Service with ClientIP affinity.
type affinitySet struct {
	name    string
	timeout time.Duration
}

// serviceObjects is everything one Service needs in one family's table.
type serviceObjects struct {
	chains  []chain
	sets    []affinitySet
	elems   []elem
	hairpin []netip.Addr
}

// builder renders the objects of one family.
type builder struct {
	family        snapshot.Family
	ip            string // "ip" or "ip6"
	addrType      string // "ipv4_addr" or "ipv6_addr"
	loopback      string // what "daddr !=" excludes from NodePorts
	clusterCIDR   netip.Prefix
	masqueradeAll bool
}

func newBuilder(f snapshot.Family, cidr netip.Prefix, masqueradeAll bool) *builder {
	b := &builder{family: f, clusterCIDR: cidr, masqueradeAll: masqueradeAll}
	if f == snapshot.FamilyOf(netip.IPv6Loopback()) {
		b.ip, b.addrType, b.loopback = "ip6", "ipv6_addr", "::1"
	} else {
		b.ip, b.addrType, b.loopback = "ip", "ipv4_addr", "127.0.0.0/8"
	}
	return b
}

// portKey names a Service port in chain and set names.
func portKey(nn types.NamespacedName, p snapshot.Port) string {
	return nn.Namespace + "/" + nn.Name + "/" + strings.ToLower(string(p.Protocol)) + "/" + strconv.Itoa(int(p.Port))
}

// service returns the objects of every port of svc in b's family. svc nil
// (deleted) or without a cluster IP of the family yields nothing.
func (b *builder) service(svc *snapshot.Service, eps *snapshot.ServiceEndpoints, node *snapshot.Node) *serviceObjects {
	out := &serviceObjects{}
	if svc == nil {
		return out
	}
	cip, ok := svc.ClusterIP(b.family)
	if !ok {
		return out
	}
	hairpin := map[netip.Addr]struct{}{}
	for _, p := range svc.Ports {
		b.port(out, svc, p, cip, snapshot.OfFamily(eps.For(p.Key()), b.family), node, hairpin)
	}
	for a := range hairpin {
		out.hairpin = append(out.hairpin, a)
	}
	return out
}

func (b *builder) port(out *serviceObjects, svc *snapshot.Service, p snapshot.Port, cip netip.Addr, eps []*snapshot.Endpoint, node *snapshot.Node, hairpin map[netip.Addr]struct{}) {
	key := portKey(svc.Name, p)
	proto := strings.ToLower(string(p.Protocol))
	port := strconv.Itoa(int(p.Port))
	pol := snapshot.PolicyOf(svc, p, b.family)
	sel := snapshot.Select(eps, pol, node)
	var externals []netip.Addr
	externals = append(externals, svc.ExternalIPsOf(b.family)...)
	vips := svc.LoadBalancerVIPsOf(b.family)
	externals = append(externals, vips...)

	// loadBalancerSourceRanges apply to the VIPs whether or not there are
	// endpoints. Ranges of the other family allow nobody here: a dual-stack
	// load balancer restricted to IPv4 clients must not be open over IPv6.
	if len(svc.SourceRanges) > 0 {
		for _, vip := range vips {
			v := vip.String()
			out.elems = append(out.elems, elem{container: firewallIPsSet, key: []string{v, proto, port}})
			for _, r := range svc.SourceRangesOf(b.family) {
				out.elems = append(out.elems, elem{container: firewallAllowSet, key: []string{v, proto, port, r.String()}})
			}
			// A node that owns the VIP reaches it from the VIP itself.
			out.elems = append(out.elems, elem{container: firewallAllowSet, key: []string{v, proto, port, v}})
		}
	}

	noEndpoints := func(verdict string, addrs []netip.Addr, nodePort bool) {
		for _, a := range addrs {
			out.elems = append(out.elems, elem{container: noEndpointServices, isMap: true, key: []string{a.String(), proto, port}, value: []string{verdict}})
		}
		if nodePort && p.NodePort != 0 {
			out.elems = append(out.elems, elem{container: noEndpointNodePort, isMap: true, key: []string{proto, strconv.Itoa(int(p.NodePort))}, value: []string{verdict}})
		}
	}
	if !sel.HasAny {
		// Nothing anywhere: refuse at once (ICMP port unreachable, TCP
		// reset) rather than let clients time out.
		noEndpoints("goto "+rejectChain, append([]netip.Addr{cip}, externals...), true)
		return
	}

	affinity := svc.AffinityTimeout
	clusterChain := ""
	if internal := sel.Internal(pol); len(internal) > 0 {
		name := "service-" + key
		c := chain{name: name}
		if rule := b.masqueradeClusterIP(cip); rule != "" {
			c.rules = append(c.rules, rule)
		}
		b.cascade(out, &c, key, proto, internal, affinity, hairpin)
		out.chains = append(out.chains, c)
		out.elems = append(out.elems, elem{container: serviceIPsMap, isMap: true, key: []string{cip.String(), proto, port}, value: []string{"goto " + name}})
		if !pol.InternalLocal {
			clusterChain = name
		}
	} else {
		// internalTrafficPolicy Local and nothing on this node.
		noEndpoints("drop", []netip.Addr{cip}, false)
	}
	if !pol.ExternallyAccessible {
		return
	}
	if clusterChain == "" && len(sel.Cluster) > 0 {
		clusterChain = "cluster-" + key
		c := chain{name: clusterChain}
		b.cascade(out, &c, key, proto, sel.Cluster, affinity, hairpin)
		out.chains = append(out.chains, c)
	}
	ext := chain{name: "external-" + key}
	if !pol.ExternalLocal {
		// The endpoint may be on another node, whose reply must come back
		// through us: masquerade.
		ext.rules = append(ext.rules, "meta mark set meta mark | "+masqueradeMark+" goto "+clusterChain)
	} else {
		if clusterChain != "" {
			// Pods and the node itself reach an external address of a
			// Local Service like its cluster IP (kube-proxy's
			// short-circuit): Cluster endpoints, no source to preserve.
			if b.clusterCIDR.IsValid() {
				ext.rules = append(ext.rules, b.ip+" saddr "+b.clusterCIDR.String()+" goto "+clusterChain)
			}
			ext.rules = append(ext.rules, "fib saddr type local meta mark set meta mark | "+masqueradeMark+" goto "+clusterChain)
		}
		// Everyone else only reaches this node's endpoints, with the
		// client's address preserved; with none, the packet falls
		// through and endpoints-check drops it.
		b.cascade(out, &ext, key, proto, sel.Local, affinity, hairpin)
	}
	out.chains = append(out.chains, ext)
	for _, a := range externals {
		out.elems = append(out.elems, elem{container: serviceIPsMap, isMap: true, key: []string{a.String(), proto, port}, value: []string{"goto " + ext.name}})
	}
	if p.NodePort != 0 {
		out.elems = append(out.elems, elem{container: serviceNodePorts, isMap: true, key: []string{proto, strconv.Itoa(int(p.NodePort))}, value: []string{"goto " + ext.name}})
	}
	if len(sel.External(pol)) == 0 {
		noEndpoints("drop", externals, true)
	}
}

// masqueradeClusterIP returns the rule that marks cluster IP traffic for
// masquerading: all of it with --masquerade-all, else what comes from
// outside the cluster CIDR (the reply would otherwise bypass us); with
// neither, kube-proxy masquerades none of it, and so do we.
func (b *builder) masqueradeClusterIP(cip netip.Addr) string {
	switch {
	case b.masqueradeAll:
		return b.ip + " daddr " + cip.String() + " meta mark set meta mark | " + masqueradeMark
	case b.clusterCIDR.IsValid():
		return b.ip + " daddr " + cip.String() + " " + b.ip + " saddr != " + b.clusterCIDR.String() + " meta mark set meta mark | " + masqueradeMark
	}
	return ""
}

// cascade appends to c the rules that send a new connection to one of
// eps: first, with affinity, to the endpoint this client used recently,
// then to a uniformly random one.
func (b *builder) cascade(out *serviceObjects, c *chain, key, proto string, eps []*snapshot.Endpoint, affinity time.Duration, hairpin map[netip.Addr]struct{}) {
	if len(eps) == 0 {
		return
	}
	sets := map[*snapshot.Endpoint]string{}
	if affinity > 0 {
		for _, e := range eps {
			name := affinitySetName(key, e, affinity)
			sets[e] = name
			out.sets = appendSet(out.sets, affinitySet{name: name, timeout: affinity})
			c.rules = append(c.rules, b.ip+" saddr @"+name+" "+b.dnat(e, name, proto))
		}
	}
	for _, e := range eps {
		// Hairpin: a pod reaching itself through the Service must be
		// masqueraded, or it would see its own address as the source.
		// Only endpoints on this node can hairpin here; an endpoint with
		// no node name might be one.
		if e.Local || e.NodeName == "" {
			hairpin[e.Addr] = struct{}{}
		}
	}
	if len(eps) <= groupSize {
		c.rules = append(c.rules, b.uniform(eps, sets, proto)...)
		return
	}
	remaining := len(eps)
	for i := 0; i < len(eps); i += groupSize {
		group := eps[i:min(i+groupSize, len(eps))]
		name := c.name + "/g" + strconv.Itoa(i/groupSize)
		if remaining > len(group) {
			c.rules = append(c.rules, "numgen random mod "+strconv.Itoa(remaining)+" < "+strconv.Itoa(len(group))+" goto "+name)
		} else {
			c.rules = append(c.rules, "goto "+name)
		}
		remaining -= len(group)
		out.chains = append(out.chains, chain{name: name, rules: b.uniform(group, sets, proto)})
	}
}

// uniform returns rules choosing uniformly among eps: rule i matches
// with probability 1/(n-i) of the connections no earlier rule took.
func (b *builder) uniform(eps []*snapshot.Endpoint, sets map[*snapshot.Endpoint]string, proto string) []string {
	rules := make([]string, 0, len(eps))
	for i, e := range eps {
		prefix := ""
		if left := len(eps) - i; left > 1 {
			prefix = "numgen random mod " + strconv.Itoa(left) + " 0 "
		}
		rules = append(rules, b.dnatWith(prefix, e, sets[e], proto))
	}
	return rules
}

// dnat returns the statement sending a connection to e; with an affinity
// set it first refreshes the client's entry.
func (b *builder) dnat(e *snapshot.Endpoint, set, proto string) string {
	return b.dnatWith("", e, set, proto)
}

// dnatWith is dnat after prefix, built with one allocation: a full sync
// renders 100,000 of these.
func (b *builder) dnatWith(prefix string, e *snapshot.Endpoint, set, proto string) string {
	var addr [64]byte
	ap := e.AddrPort().AppendTo(addr[:0])
	if set == "" {
		return prefix + "meta l4proto " + proto + " dnat to " + string(ap)
	}
	return prefix + "meta l4proto " + proto + " update @" + set + " { " + b.ip + " saddr } dnat to " + string(ap)
}

func affinitySetName(key string, e *snapshot.Endpoint, timeout time.Duration) string {
	// IPv6 colons are not valid in nft names; nothing else uses "-" in an
	// address, so the mapping stays one-to-one. The timeout is part of the
	// name because a set's timeout cannot change: a new timeout is a new set.
	addr := strings.ReplaceAll(e.Addr.String(), ":", "-")
	return "affinity-" + key + "/" + addr + "_" + strconv.Itoa(int(e.Port)) + "-t" + strconv.Itoa(int(timeout/time.Second))
}

func appendSet(sets []affinitySet, s affinitySet) []affinitySet {
	for _, have := range sets {
		if have.name == s.name {
			return sets
		}
	}
	return append(sets, s)
}
