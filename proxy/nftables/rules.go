//go:build linux

package nftables

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/nftables/netlink"
	"portal.dev/portal/proxy/snapshot"
)

// Names of the static objects in the portal table. Per-Service objects
// are named after "namespace/name/protocol/port"; Kubernetes names cannot
// contain "/", so those names cannot collide.
const (
	tableName = "portal"

	servicesChain     = "services"
	endpointsCheck    = "endpoints-check"
	firewallCheck     = "firewall-check"
	masqueradingChain = "masquerading"
	rejectChain       = "reject-chain"

	// refusePrefix names the chain of a Service port without endpoints:
	// it counts the connections refused, then rejects them through
	// rejectChain. Only such ports have one, so a Service that has
	// endpoints costs no extra chain.
	refusePrefix       = "refuse-"
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

	// groupSize caps how many endpoints one affinity chain chooses among.
	// Affinity needs a rule per endpoint (each refreshes that endpoint's
	// set), chosen by a cascade of "numgen random mod k" rules, one per
	// endpoint (each rule matching with probability 1/k of what is left
	// gives a uniform choice); past groupSize endpoints it first picks a
	// group the same way, weighted by group size, so the first packet of
	// a connection walks O(sqrt n) rules, not O(n).
	groupSize = 32

	// endpointMapPrefix names the shared endpoint maps, one per protocol
	// and group of chainsPerEndpointMap chains ("endpoints-tcp-0", ...).
	endpointMapPrefix = "endpoints-"
	// chainsPerEndpointMap chains share one endpoint map; each owns a
	// range of maxEndpointsPerChain slots in it.
	chainsPerEndpointMap = 64
	maxEndpointsPerChain = 1 << 16
)

// Endpoint selection without affinity is one rule per chain,
//
//	meta l4proto tcp dnat ip to numgen random mod N offset O map @endpoints-tcp-B
//
// with the chain's N endpoints the elements O..O+N-1 of a map shared with
// other chains. So an endpoint change is a map element change, which the
// kernel applies without re-validating the ruleset, and only a change in
// the number of endpoints rewrites the rule. The alternatives cost more
// as Services grow:
//
//   - a cascade of one rule per endpoint: every transaction that adds a
//     rule re-validates every chain reachable from the hooks, and a full
//     sync creates a rule per endpoint.
//   - a map per Service (named or anonymous): the kernel keeps a table's
//     sets in a list it searches by name (and allocates anonymous names
//     by scanning it), O(n^2) in Services.
//   - one map for all Services: binding a map to a rule in a new chain
//     walks all its elements, so rules x elements.
//   - shared maps of 64 chains each: both costs stay small. Rules are
//     written before the elements: on an empty map a binding walks
//     nothing.
//
// The key is the slot number; "numgen ... offset" adds the chain's first
// slot. The value's typeof names the protocol (nft 1.0.6 refuses a "th
// dport" map in a rule that matched "meta l4proto tcp"), hence one map
// per protocol.

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

// slotRange is a chain's endpoints in a shared endpoint map: slot
// offset(id)+i holds eps[i].
type slotRange struct {
	chain string
	proto string // "tcp", "udp" or "sctp"
	id    uint32
	eps   []netip.AddrPort
}

// endpointMap names the map holding the slots of chain id for proto.
func endpointMap(proto string, id uint32) string {
	return endpointMapPrefix + proto + "-" + strconv.Itoa(int(id/chainsPerEndpointMap))
}

// slotOffset is chain id's first slot in its endpoint map.
func slotOffset(id uint32) uint32 { return (id % chainsPerEndpointMap) * maxEndpointsPerChain }

func (r slotRange) mapName() string { return endpointMap(r.proto, r.id) }

// slots returns r as the netlink writer takes it.
func (r slotRange) slots() *netlink.Slots {
	return &netlink.Slots{Map: r.mapName(), Chain: r.chain, First: slotOffset(r.id), Endpoints: r.eps}
}

// elem returns the map element of slot i of r.
func (r slotRange) elem(i int) *knftables.Element {
	s := netlink.Slots{Map: r.mapName(), First: slotOffset(r.id), Endpoints: r.eps}
	return s.Element(i)
}

// chainIDs gives each chain that selects endpoints through a shared map
// its slot range; see idAllocator.
type chainIDs func(chain string) uint32

// serviceObjects is everything one Service needs in one family's table.
type serviceObjects struct {
	chains  []chain
	sets    []affinitySet
	elems   []elem
	slots   []slotRange // at most a few, so a slice, not a map
	hairpin []netip.Addr
}

// findSlots returns the slot range of chain in slots.
func findSlots(slots []slotRange, chain string) (slotRange, bool) {
	for _, r := range slots {
		if r.chain == chain {
			return r, true
		}
	}
	return slotRange{}, false
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
func (b *builder) service(svc *snapshot.Service, eps *snapshot.ServiceEndpoints, node *snapshot.Node, ids chainIDs) *serviceObjects {
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
		b.port(out, svc, p, cip, snapshot.OfFamily(eps.For(p.Key()), b.family), node, hairpin, ids)
	}
	for a := range hairpin {
		out.hairpin = append(out.hairpin, a)
	}
	return out
}

// portObjects is one Service port being built: what every step of port
// needs to know about it.
type portObjects struct {
	b         *builder
	out       *serviceObjects
	p         snapshot.Port
	key       string
	proto     string
	port      string
	cip       netip.Addr
	externals []netip.Addr
	pol       snapshot.Policy
	sel       snapshot.Selection
	affinity  time.Duration
	hairpin   map[netip.Addr]struct{}
	ids       chainIDs
}

// port appends to out the objects of one Service port: its firewall, the
// chains that choose an endpoint for internal and external traffic, and
// the map elements that send traffic to them or refuse it.
func (b *builder) port(out *serviceObjects, svc *snapshot.Service, p snapshot.Port, cip netip.Addr, eps []*snapshot.Endpoint, node *snapshot.Node, hairpin map[netip.Addr]struct{}, ids chainIDs) {
	pol := snapshot.PolicyOf(svc, p, b.family)
	po := &portObjects{
		b: b, out: out, p: p,
		key:      portKey(svc.Name, p),
		proto:    strings.ToLower(string(p.Protocol)),
		port:     strconv.Itoa(int(p.Port)),
		cip:      cip,
		pol:      pol,
		sel:      snapshot.Select(eps, pol, node),
		affinity: svc.AffinityTimeout,
		hairpin:  hairpin,
		ids:      ids,
	}
	vips := svc.LoadBalancerVIPsOf(b.family)
	po.externals = append(append(po.externals, svc.ExternalIPsOf(b.family)...), vips...)

	// loadBalancerSourceRanges apply to the VIPs whether or not there are
	// endpoints.
	if len(svc.SourceRanges) > 0 {
		po.firewall(vips, svc.SourceRangesOf(b.family))
	}
	if !po.sel.HasAny {
		// Nothing anywhere: refuse at once (ICMP port unreachable, TCP
		// reset) rather than let clients time out.
		refuse := refusePrefix + po.key
		out.chains = append(out.chains, chain{name: refuse, rules: []string{"counter goto " + rejectChain}})
		po.noEndpoints("goto "+refuse, append([]netip.Addr{cip}, po.externals...), true)
		return
	}
	clusterChain := po.internal()
	if !pol.ExternallyAccessible {
		return
	}
	po.external(clusterChain)
}

// firewall lets only ranges reach vips. Ranges of the other family allow
// nobody here: a dual-stack load balancer restricted to IPv4 clients must
// not be open over IPv6.
func (po *portObjects) firewall(vips []netip.Addr, ranges []netip.Prefix) {
	ranges = outermostRanges(ranges)
	for _, vip := range vips {
		v := vip.String()
		po.out.elems = append(po.out.elems, elem{container: firewallIPsSet, key: []string{v, po.proto, po.port}})
		for _, r := range ranges {
			po.out.elems = append(po.out.elems, elem{container: firewallAllowSet, key: []string{v, po.proto, po.port, r.String()}})
		}
		// A node that owns the VIP reaches it from the VIP itself.
		if !slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Contains(vip) }) {
			po.out.elems = append(po.out.elems, elem{container: firewallAllowSet, key: []string{v, po.proto, po.port, v}})
		}
	}
}

// noEndpoints gives traffic to addrs, and to the NodePort if nodePort,
// verdict instead of an endpoint.
func (po *portObjects) noEndpoints(verdict string, addrs []netip.Addr, nodePort bool) {
	for _, a := range addrs {
		po.out.elems = append(po.out.elems, elem{container: noEndpointServices, isMap: true, key: []string{a.String(), po.proto, po.port}, value: []string{verdict}})
	}
	if nodePort && po.p.NodePort != 0 {
		po.out.elems = append(po.out.elems, elem{container: noEndpointNodePort, isMap: true, key: []string{po.proto, strconv.Itoa(int(po.p.NodePort))}, value: []string{verdict}})
	}
}

// internal writes the chain for traffic to the cluster IP and returns its
// name if external traffic can use it too (Cluster policy), else "".
func (po *portObjects) internal() (clusterChain string) {
	internal := po.sel.Internal(po.pol)
	if len(internal) == 0 {
		// internalTrafficPolicy Local and nothing on this node.
		po.noEndpoints("drop", []netip.Addr{po.cip}, false)
		return ""
	}
	name := "service-" + po.key
	c := chain{name: name}
	if rule := po.b.masqueradeClusterIP(po.cip); rule != "" {
		c.rules = append(c.rules, rule)
	}
	po.b.choose(po.out, &c, po.key, po.proto, internal, po.affinity, po.hairpin, po.ids)
	po.out.chains = append(po.out.chains, c)
	po.out.elems = append(po.out.elems, elem{container: serviceIPsMap, isMap: true, key: []string{po.cip.String(), po.proto, po.port}, value: []string{"goto " + name}})
	if po.pol.InternalLocal {
		return ""
	}
	return name
}

// external writes the chain for traffic to the external IPs, VIPs and
// NodePort, and the map elements that send that traffic to it.
func (po *portObjects) external(clusterChain string) {
	b := po.b
	if clusterChain == "" && len(po.sel.Cluster) > 0 {
		clusterChain = "cluster-" + po.key
		c := chain{name: clusterChain}
		b.choose(po.out, &c, po.key, po.proto, po.sel.Cluster, po.affinity, po.hairpin, po.ids)
		po.out.chains = append(po.out.chains, c)
	}
	ext := chain{name: "external-" + po.key}
	if !po.pol.ExternalLocal {
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
		b.choose(po.out, &ext, po.key, po.proto, po.sel.Local, po.affinity, po.hairpin, po.ids)
	}
	po.out.chains = append(po.out.chains, ext)
	for _, a := range po.externals {
		po.out.elems = append(po.out.elems, elem{container: serviceIPsMap, isMap: true, key: []string{a.String(), po.proto, po.port}, value: []string{"goto " + ext.name}})
	}
	if po.p.NodePort != 0 {
		po.out.elems = append(po.out.elems, elem{container: serviceNodePorts, isMap: true, key: []string{po.proto, strconv.Itoa(int(po.p.NodePort))}, value: []string{"goto " + ext.name}})
	}
	if len(po.sel.External(po.pol)) == 0 {
		po.noEndpoints("drop", po.externals, true)
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

// choose appends to c the rules that send a new connection to one of
// eps, uniformly at random: one rule and a slot range in a shared map,
// or, with affinity, a cascade that first sends the client to the
// endpoint it used recently. Every connection a Service port load-balances
// passes exactly one choose, so its counter there counts the port's new
// connections (the nat chains see only a connection's first packet); the
// counter rides on the dnat rule rather than a rule of its own, which
// would add a rule per Service to every full sync.
func (b *builder) choose(out *serviceObjects, c *chain, key, proto string, eps []*snapshot.Endpoint, affinity time.Duration, hairpin map[netip.Addr]struct{}, ids chainIDs) {
	if len(eps) == 0 {
		return
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
	if affinity > 0 {
		c.rules = append(c.rules, "counter")
		b.cascade(out, c, key, proto, eps, affinity)
		return
	}
	// A Service with more endpoints than a slot range holds uses the
	// first maxEndpointsPerChain; no real Service has that many.
	eps = eps[:min(len(eps), maxEndpointsPerChain)]
	r := slotRange{chain: c.name, proto: proto, id: ids(c.name), eps: make([]netip.AddrPort, len(eps))}
	for i, e := range eps {
		r.eps[i] = e.AddrPort()
	}
	out.slots = append(out.slots, r)
	c.rules = append(c.rules, "meta l4proto "+proto+" counter dnat "+b.ip+" to numgen random mod "+strconv.Itoa(len(eps))+
		" offset "+strconv.FormatUint(uint64(slotOffset(r.id)), 10)+" map @"+r.mapName())
}

// cascade appends to c the rules of a Service with ClientIP affinity:
// each endpoint has a set of the clients that used it recently; a client
// in one goes back there, others get a uniformly random endpoint and are
// added to its set.
func (b *builder) cascade(out *serviceObjects, c *chain, key, proto string, eps []*snapshot.Endpoint, affinity time.Duration) {
	sets := map[*snapshot.Endpoint]string{}
	for _, e := range eps {
		name := affinitySetName(key, e, affinity)
		sets[e] = name
		out.sets = appendSet(out.sets, affinitySet{name: name, timeout: affinity})
		c.rules = append(c.rules, b.ip+" saddr @"+name+" "+b.dnat(e, name, proto))
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

// idAllocator hands out the chain ids that place chains' slot ranges in
// the shared endpoint maps. A chain keeps its id while it exists, so a
// sync rewrites only what changed. Ids are reused lowest-first to keep
// the number of maps near chains/chainsPerEndpointMap.
type idAllocator struct {
	ids  map[string]uint32
	free []uint32 // released ids, sorted descending: the lowest is last
	next uint32
}

// get returns chain's id, allocating one if it has none.
func (a *idAllocator) get(chain string) uint32 {
	if id, ok := a.ids[chain]; ok {
		return id
	}
	if a.ids == nil {
		a.ids = map[string]uint32{}
	}
	var id uint32
	if n := len(a.free); n > 0 {
		id, a.free = a.free[n-1], a.free[:n-1]
	} else {
		id = a.next
		a.next++
	}
	a.ids[chain] = id
	return id
}

// release frees chain's id, if it has one.
func (a *idAllocator) release(chain string) {
	id, ok := a.ids[chain]
	if !ok {
		return
	}
	delete(a.ids, chain)
	i, _ := slices.BinarySearchFunc(a.free, id, func(x, t uint32) int { return cmp.Compare(t, x) })
	a.free = slices.Insert(a.free, i, id)
}

// keepOnly releases the ids of every chain not in keep.
func (a *idAllocator) keepOnly(keep func(chain string) bool) {
	for c := range a.ids {
		if !keep(c) {
			a.release(c)
		}
	}
}

// outermostRanges returns ranges without the ones another range covers.
// firewall-allow is an interval set, and the kernel refuses an interval
// that overlaps one it has: "0.0.0.0/0" next to anything, "10.0.0.0/8"
// next to "10.1.0.0/16", or a range holding the VIP next to the VIP
// would fail the whole transaction, sync after sync.
func outermostRanges(ranges []netip.Prefix) []netip.Prefix {
	sorted := slices.Clone(ranges)
	// Wider first: a range can only be covered by one sorted before it.
	slices.SortStableFunc(sorted, func(a, b netip.Prefix) int { return a.Bits() - b.Bits() })
	var out []netip.Prefix
	for _, r := range sorted {
		r = r.Masked()
		if !slices.ContainsFunc(out, func(o netip.Prefix) bool { return o.Contains(r.Addr()) }) {
			out = append(out, r)
		}
	}
	return out
}
