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

func (b *builder) port(out *serviceRules, svc *snapshot.Service, p snapshot.Port, cip netip.Addr, eps []*snapshot.Endpoint, node *snapshot.Node) {
	id := portID(svc.Name, p)
	proto := strings.ToLower(string(p.Protocol))
	match := func(a netip.Addr) string {
		return "-d " + b.host(a) + " -p " + proto + " -m " + proto + " --dport " + strconv.Itoa(int(p.Port))
	}
	nodePortMatch := "-p " + proto + " -m " + proto + " --dport " + strconv.Itoa(int(p.NodePort))
	comment := "-m comment --comment \"" + svc.Name.String() + ":" + p.Name + "\" "
	pol := snapshot.PolicyOf(svc, p, b.family)
	sel := snapshot.Select(eps, pol, node)
	externals := append(svc.ExternalIPsOf(b.family), svc.LoadBalancerVIPsOf(b.family)...)

	filterAll := func(verdict string, addrs []netip.Addr, nodePort bool) {
		for _, a := range addrs {
			out.filterServices = append(out.filterServices, comment+match(a)+" -j "+verdict)
		}
		if nodePort && p.NodePort != 0 {
			out.filterNodePorts = append(out.filterNodePorts, comment+nodePortMatch+" -j "+verdict)
		}
	}
	if !sel.HasAny {
		// Nothing anywhere: refuse at once (ICMP port unreachable, which
		// a TCP client sees as "connection refused") rather than time out.
		filterAll("REJECT", append([]netip.Addr{cip}, externals...), true)
		return
	}

	svcChain := chainName("PORTAL-SVC-", id)
	svlChain := chainName("PORTAL-SVL-", id)
	extChain := chainName("PORTAL-EXT-", id)
	fwChain := chainName("PORTAL-FW-", id)
	affinity := svc.AffinityTimeout
	var clusterUsed, localUsed bool

	if internal := sel.Internal(pol); len(internal) > 0 {
		target := svcChain
		if pol.InternalLocal {
			target = svlChain
		}
		out.natServices = append(out.natServices, comment+match(cip)+" -j "+target)
		clusterUsed, localUsed = clusterUsed || !pol.InternalLocal, localUsed || pol.InternalLocal
	} else {
		// internalTrafficPolicy Local and nothing on this node.
		filterAll("DROP", []netip.Addr{cip}, false)
	}

	if pol.ExternallyAccessible {
		ext := chain{name: extChain}
		if !pol.ExternalLocal {
			// The endpoint may be on another node, whose reply must come
			// back through us: masquerade.
			ext.rules = append(ext.rules, "-j "+markMasqChain, "-j "+svcChain)
			clusterUsed = true
		} else {
			if len(sel.Cluster) > 0 {
				// Pods and the node itself reach an external address of a
				// Local Service like its cluster IP (kube-proxy's
				// short-circuit): Cluster endpoints, nothing to preserve.
				if b.clusterCIDR.IsValid() {
					ext.rules = append(ext.rules, "-s "+b.clusterCIDR.String()+" -j "+svcChain)
				}
				ext.rules = append(ext.rules, "-m addrtype --src-type LOCAL -j "+markMasqChain, "-m addrtype --src-type LOCAL -j "+svcChain)
				clusterUsed = true
			}
			// Everyone else only reaches this node's endpoints; with none,
			// the packet falls through and the filter table drops it.
			ext.rules = append(ext.rules, "-j "+svlChain)
			localUsed = true
		}
		out.natChains = append(out.natChains, ext)

		for _, a := range svc.ExternalIPsOf(b.family) {
			out.natServices = append(out.natServices, comment+match(a)+" -j "+extChain)
		}
		vips := svc.LoadBalancerVIPsOf(b.family)
		if len(svc.SourceRanges) > 0 && len(vips) > 0 {
			// Ranges of the other family allow nobody here: a dual-stack
			// load balancer restricted to IPv4 clients must not be open
			// over IPv6. A node that owns the VIP reaches it from the VIP.
			fw := chain{name: fwChain}
			for _, r := range svc.SourceRangesOf(b.family) {
				fw.rules = append(fw.rules, "-s "+r.String()+" -j "+extChain)
			}
			for _, v := range vips {
				fw.rules = append(fw.rules, "-s "+b.host(v)+" -j "+extChain)
			}
			fw.rules = append(fw.rules, "-j "+markDropChain)
			out.natChains = append(out.natChains, fw)
			for _, v := range vips {
				out.natServices = append(out.natServices, comment+match(v)+" -j "+fwChain)
			}
		} else {
			for _, v := range vips {
				out.natServices = append(out.natServices, comment+match(v)+" -j "+extChain)
			}
		}
		if p.NodePort != 0 {
			out.natNodePorts = append(out.natNodePorts, comment+nodePortMatch+" -j "+extChain)
		}
		if len(sel.External(pol)) == 0 {
			filterAll("DROP", externals, true)
		}
	}

	if clusterUsed {
		c := chain{name: svcChain}
		if r := b.masqueradeClusterIP(cip, proto, p.Port); r != "" {
			c.rules = append(c.rules, r)
		}
		b.cascade(out, &c, id, proto, sel.Cluster, affinity)
		out.natChains = append(out.natChains, c)
	}
	if localUsed {
		c := chain{name: svlChain}
		if pol.InternalLocal {
			if r := b.masqueradeClusterIP(cip, proto, p.Port); r != "" {
				c.rules = append(c.rules, r)
			}
		}
		b.cascade(out, &c, id, proto, sel.Local, affinity)
		out.natChains = append(out.natChains, c)
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
