package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// Names of the chains every sync writes in full. Per-Service chains are
// PORTAL-{SVC,SVL,EXT,FW,SEP}-<hash>. Chain names are capped at 28
// characters by the kernel's xt name limit, so a Service port or endpoint
// is named by 16 characters of a hash of its identity, as kube-proxy does:
// "PORTAL-SEP-" is 11, which leaves room.
const (
	servicesChain  = "PORTAL-SERVICES"    // nat: dispatch by destination; filter: reject/drop
	nodePortsChain = "PORTAL-NODEPORTS"   // nat: NodePort dispatch; filter: NodePort reject/drop
	postroutingCh  = "PORTAL-POSTROUTING" // nat: masquerade what is marked
	markMasqChain  = "PORTAL-MARK-MASQ"   // nat: mark for masquerading
	markDropChain  = "PORTAL-MARK-DROP"   // nat: mark for dropping (source ranges)
	firewallChain  = "PORTAL-FIREWALL"    // filter: drop what MARK-DROP marked

	masqueradeMark = "0x4000"
	dropMark       = "0x8000"
)

// chain is a chain's name and its rules, each the arguments after
// "-A <name>".
type chain struct {
	name  string
	rules []string
}

// serviceRules is what one Service contributes to one family's tables:
// chains of its own, and rules in the shared chains that every sync
// rewrites.
type serviceRules struct {
	natChains       []chain
	natServices     []string // rules of nat PORTAL-SERVICES
	natNodePorts    []string // rules of nat PORTAL-NODEPORTS
	filterServices  []string // rules of filter PORTAL-SERVICES
	filterNodePorts []string // rules of filter PORTAL-NODEPORTS
}

func (r *serviceRules) empty() bool {
	return len(r.natChains) == 0 && len(r.natServices) == 0 && len(r.natNodePorts) == 0 &&
		len(r.filterServices) == 0 && len(r.filterNodePorts) == 0
}

// builder renders Services into rules for one family. It is pure.
type builder struct {
	family        snapshot.Family
	hostBits      string // "/32" or "/128"
	loopback      string
	clusterCIDR   netip.Prefix // invalid when unknown
	masqueradeAll bool
}

func newBuilder(f snapshot.Family, clusterCIDR netip.Prefix, masqueradeAll bool) *builder {
	b := &builder{family: f, clusterCIDR: clusterCIDR, masqueradeAll: masqueradeAll, hostBits: "/32", loopback: "127.0.0.0/8"}
	if f == snapshot.Family("IPv6") {
		b.hostBits, b.loopback = "/128", "::1/128"
	}
	return b
}

func (b *builder) host(a netip.Addr) string { return a.String() + b.hostBits }

// chainName returns prefix + 16 characters of a hash of id.
func chainName(prefix, id string) string {
	sum := sha256.Sum256([]byte(id))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:16]
}

func portID(nn types.NamespacedName, p snapshot.Port) string {
	return nn.Namespace + "/" + nn.Name + ":" + p.Name + "/" + strings.ToLower(string(p.Protocol))
}

// service renders every port of svc in b's family; svc nil (deleted) or
// without a cluster IP of the family yields nothing.
func (b *builder) service(svc *snapshot.Service, eps *snapshot.ServiceEndpoints, node *snapshot.Node) *serviceRules {
	out := &serviceRules{}
	if svc == nil {
		return out
	}
	cip, ok := svc.ClusterIP(b.family)
	if !ok {
		return out
	}
	for _, p := range svc.Ports {
		b.port(out, svc, p, cip, snapshot.OfFamily(eps.For(p.Key()), b.family), node)
	}
	return out
}

// portRules is one Service port being built: what every step of port
// needs to know about it, and which endpoint chains the steps used.
type portRules struct {
	b             *builder
	out           *serviceRules
	svc           *snapshot.Service
	p             snapshot.Port
	id            string
	proto         string
	comment       string
	nodePortMatch string
	cip           netip.Addr
	pol           snapshot.Policy
	sel           snapshot.Selection

	svcChain, svlChain, extChain, fwChain string
	clusterUsed, localUsed                bool
}

// port appends to out the rules of one Service port: the filter rules
// that refuse or drop traffic without endpoints, the nat rules that send
// traffic to its chains, and those chains.
func (b *builder) port(out *serviceRules, svc *snapshot.Service, p snapshot.Port, cip netip.Addr, eps []*snapshot.Endpoint, node *snapshot.Node) {
	id := portID(svc.Name, p)
	proto := strings.ToLower(string(p.Protocol))
	pol := snapshot.PolicyOf(svc, p, b.family)
	pr := &portRules{
		b: b, out: out, svc: svc, p: p, id: id, proto: proto, cip: cip, pol: pol,
		comment:       "-m comment --comment \"" + svc.Name.String() + ":" + p.Name + "\" ",
		nodePortMatch: "-p " + proto + " -m " + proto + " --dport " + strconv.Itoa(int(p.NodePort)),
		sel:           snapshot.Select(eps, pol, node),
		svcChain:      chainName("PORTAL-SVC-", id),
		svlChain:      chainName("PORTAL-SVL-", id),
		extChain:      chainName("PORTAL-EXT-", id),
		fwChain:       chainName("PORTAL-FW-", id),
	}
	if !pr.sel.HasAny {
		// Nothing anywhere: refuse at once (ICMP port unreachable, which
		// a TCP client sees as "connection refused") rather than time out.
		pr.filterAll("REJECT", append([]netip.Addr{cip}, pr.externals()...), true)
		return
	}
	pr.internal()
	if pol.ExternallyAccessible {
		pr.external()
	}
	pr.endpointChains()
}

// externals returns the Service's external IPs and load balancer VIPs of
// the builder's family.
func (pr *portRules) externals() []netip.Addr {
	return append(pr.svc.ExternalIPsOf(pr.b.family), pr.svc.LoadBalancerVIPsOf(pr.b.family)...)
}

// match returns the rule match for traffic to a on the Service port.
func (pr *portRules) match(a netip.Addr) string {
	return "-d " + pr.b.host(a) + " -p " + pr.proto + " -m " + pr.proto + " --dport " + strconv.Itoa(int(pr.p.Port))
}

// filterAll gives traffic to addrs, and to the NodePort if nodePort,
// verdict in the filter table.
func (pr *portRules) filterAll(verdict string, addrs []netip.Addr, nodePort bool) {
	for _, a := range addrs {
		pr.out.filterServices = append(pr.out.filterServices, pr.comment+pr.match(a)+" -j "+verdict)
	}
	if nodePort && pr.p.NodePort != 0 {
		pr.out.filterNodePorts = append(pr.out.filterNodePorts, pr.comment+pr.nodePortMatch+" -j "+verdict)
	}
}

// internal sends traffic to the cluster IP to the chain its policy picks,
// or drops it when there is no endpoint to pick.
func (pr *portRules) internal() {
	if len(pr.sel.Internal(pr.pol)) == 0 {
		// internalTrafficPolicy Local and nothing on this node.
		pr.filterAll("DROP", []netip.Addr{pr.cip}, false)
		return
	}
	target := pr.svcChain
	if pr.pol.InternalLocal {
		target = pr.svlChain
	}
	pr.out.natServices = append(pr.out.natServices, pr.comment+pr.match(pr.cip)+" -j "+target)
	pr.clusterUsed, pr.localUsed = pr.clusterUsed || !pr.pol.InternalLocal, pr.localUsed || pr.pol.InternalLocal
}

// external writes the chain for external traffic and sends the external
// IPs, VIPs (through their firewall) and NodePort to it.
func (pr *portRules) external() {
	pr.externalChain()
	for _, a := range pr.svc.ExternalIPsOf(pr.b.family) {
		pr.out.natServices = append(pr.out.natServices, pr.comment+pr.match(a)+" -j "+pr.extChain)
	}
	vips := pr.svc.LoadBalancerVIPsOf(pr.b.family)
	if len(pr.svc.SourceRanges) > 0 && len(vips) > 0 {
		pr.firewall(vips)
	} else {
		for _, v := range vips {
			pr.out.natServices = append(pr.out.natServices, pr.comment+pr.match(v)+" -j "+pr.extChain)
		}
	}
	if pr.p.NodePort != 0 {
		pr.out.natNodePorts = append(pr.out.natNodePorts, pr.comment+pr.nodePortMatch+" -j "+pr.extChain)
	}
	if len(pr.sel.External(pr.pol)) == 0 {
		pr.filterAll("DROP", pr.externals(), true)
	}
}

// externalChain writes the chain external traffic goes through, which
// picks the endpoint chain its policy wants.
func (pr *portRules) externalChain() {
	b := pr.b
	ext := chain{name: pr.extChain}
	if !pr.pol.ExternalLocal {
		// The endpoint may be on another node, whose reply must come
		// back through us: masquerade.
		ext.rules = append(ext.rules, "-j "+markMasqChain, "-j "+pr.svcChain)
		pr.clusterUsed = true
	} else {
		if len(pr.sel.Cluster) > 0 {
			// Pods and the node itself reach an external address of a
			// Local Service like its cluster IP (kube-proxy's
			// short-circuit): Cluster endpoints, nothing to preserve.
			if b.clusterCIDR.IsValid() {
				ext.rules = append(ext.rules, "-s "+b.clusterCIDR.String()+" -j "+pr.svcChain)
			}
			ext.rules = append(ext.rules, "-m addrtype --src-type LOCAL -j "+markMasqChain, "-m addrtype --src-type LOCAL -j "+pr.svcChain)
			pr.clusterUsed = true
		}
		// Everyone else only reaches this node's endpoints; with none,
		// the packet falls through and the filter table drops it.
		ext.rules = append(ext.rules, "-j "+pr.svlChain)
		pr.localUsed = true
	}
	pr.out.natChains = append(pr.out.natChains, ext)
}

// firewall sends traffic to vips through a chain that lets only the
// source ranges on. Ranges of the other family allow nobody here: a
// dual-stack load balancer restricted to IPv4 clients must not be open
// over IPv6. A node that owns the VIP reaches it from the VIP.
func (pr *portRules) firewall(vips []netip.Addr) {
	fw := chain{name: pr.fwChain}
	for _, r := range pr.svc.SourceRangesOf(pr.b.family) {
		fw.rules = append(fw.rules, "-s "+r.String()+" -j "+pr.extChain)
	}
	for _, v := range vips {
		fw.rules = append(fw.rules, "-s "+pr.b.host(v)+" -j "+pr.extChain)
	}
	fw.rules = append(fw.rules, "-j "+markDropChain)
	pr.out.natChains = append(pr.out.natChains, fw)
	for _, v := range vips {
		pr.out.natServices = append(pr.out.natServices, pr.comment+pr.match(v)+" -j "+pr.fwChain)
	}
}

// endpointChains writes the cluster-wide and node-local endpoint chains
// the other steps sent traffic to.
func (pr *portRules) endpointChains() {
	b := pr.b
	affinity := pr.svc.AffinityTimeout
	if pr.clusterUsed {
		c := chain{name: pr.svcChain}
		if r := b.masqueradeClusterIP(pr.cip, pr.proto, pr.p.Port); r != "" {
			c.rules = append(c.rules, r)
		}
		b.cascade(pr.out, &c, pr.id, pr.proto, pr.sel.Cluster, affinity)
		pr.out.natChains = append(pr.out.natChains, c)
	}
	if pr.localUsed {
		c := chain{name: pr.svlChain}
		if pr.pol.InternalLocal {
			if r := b.masqueradeClusterIP(pr.cip, pr.proto, pr.p.Port); r != "" {
				c.rules = append(c.rules, r)
			}
		}
		b.cascade(pr.out, &c, pr.id, pr.proto, pr.sel.Local, affinity)
		pr.out.natChains = append(pr.out.natChains, c)
	}
}

// masqueradeClusterIP returns the rule that marks cluster IP traffic for
// masquerading: all of it with --masquerade-all, else what comes from
// outside the cluster CIDR (the reply would otherwise bypass us); with
// neither, none, as in kube-proxy.
func (b *builder) masqueradeClusterIP(cip netip.Addr, proto string, port uint16) string {
	m := "-d " + b.host(cip) + " -p " + proto + " -m " + proto + " --dport " + strconv.Itoa(int(port))
	switch {
	case b.masqueradeAll:
		return m + " -j " + markMasqChain
	case b.clusterCIDR.IsValid():
		return "! -s " + b.clusterCIDR.String() + " " + m + " -j " + markMasqChain
	}
	return ""
}

// cascade appends to c the rules that send a new connection to one of
// eps (first, with affinity, to the endpoint this client used recently,
// then to a uniformly random one), and the endpoints' chains to out.
// Endpoint chains are per Service port and chain kind (cluster or local),
// as their recent lists carry the affinity timeout.
func (b *builder) cascade(out *serviceRules, c *chain, id, proto string, eps []*snapshot.Endpoint, affinity time.Duration) {
	names := make([]string, len(eps))
	for i, e := range eps {
		names[i] = chainName("PORTAL-SEP-", id+"/"+e.String())
	}
	if affinity > 0 {
		secs := strconv.Itoa(int(affinity / time.Second))
		for i := range eps {
			c.rules = append(c.rules, "-m recent --name "+names[i]+" --rcheck --seconds "+secs+" --reap -j "+names[i])
		}
	}
	for i := range eps {
		if left := len(eps) - i; left > 1 {
			c.rules = append(c.rules, "-m statistic --mode random --probability "+probability(left)+" -j "+names[i])
		} else {
			c.rules = append(c.rules, "-j "+names[i])
		}
	}
	for i, e := range eps {
		if containsChain(out.natChains, names[i]) {
			continue // the cluster and local lists share endpoints
		}
		sep := chain{name: names[i]}
		// Hairpin: a pod reaching itself through the Service must be
		// masqueraded, or it would see its own address as the source.
		sep.rules = append(sep.rules, "-s "+b.host(e.Addr)+" -j "+markMasqChain)
		dnat := "-p " + proto + " -m " + proto
		if affinity > 0 {
			dnat += " -m recent --name " + names[i] + " --set"
		}
		sep.rules = append(sep.rules, dnat+" -j DNAT --to-destination "+e.AddrPort().String())
		out.natChains = append(out.natChains, sep)
	}
}

func containsChain(cs []chain, name string) bool {
	for _, c := range cs {
		if c.name == name {
			return true
		}
	}
	return false
}

// probability returns 1/n as iptables-restore reads it (kube-proxy's
// format: ten decimals).
func probability(n int) string {
	return strconv.FormatFloat(1.0/float64(n), 'f', 10, 64)
}
