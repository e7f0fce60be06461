// Package answer turns one DNS question about the cluster zone (or a
// reverse name of a cluster address) into the authoritative reply, following
// the Kubernetes DNS-Based Service Discovery specification (schema 1.1.0)
// and, where it is silent, what CoreDNS's kubernetes plugin answers.
//
// It is pure: the records come from an index.Index, the reply is a
// miekg/dns message. It does no I/O, no forwarding, no EDNS and no
// truncation: the server around it does those.
package answer

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"portal.dev/portal/dns/index"
)

// SchemaVersion is the Kubernetes DNS schema served at dns-version.<zone>.
const SchemaVersion = "1.1.0"

// PodMode says which pod records (<a-b-c-d>.<ns>.pod.<zone>) exist.
type PodMode uint8

const (
	// PodsInsecure answers any well-formed dashed IP in an existing
	// namespace, as kube-dns did (CoreDNS "pods insecure").
	PodsInsecure PodMode = iota
	// PodsVerified answers only the IPs of Pods in that namespace.
	PodsVerified
	// PodsDisabled answers no pod records.
	PodsDisabled
)

// Config is what the answers depend on besides the index.
type Config struct {
	// Zone is the cluster domain, e.g. "cluster.local" (dot optional).
	Zone string
	// TTL of every record, and the negative TTL (SOA minimum).
	TTL  uint32
	Pods PodMode
	// NSAddrs are the addresses of ns.dns.<zone>, the name server in the
	// zone's NS record, when there is no kube-system/kube-dns Service (whose
	// cluster IPs take precedence). Typically the server's own addresses.
	NSAddrs []netip.Addr
}

// Answerer answers questions from an index. Its methods are safe for
// concurrent use.
type Answerer struct {
	cfg    Config
	zone   string // lower-cased, fully qualified
	nsName string // ns.dns.<zone>
	idx    *index.Index
}

// New returns an Answerer for cfg over idx.
func New(cfg Config, idx *index.Index) *Answerer {
	z := dns.Fqdn(strings.ToLower(cfg.Zone))
	return &Answerer{cfg: cfg, zone: z, nsName: "ns.dns." + z, idx: idx}
}

// Zone is the fully qualified, lower-cased cluster zone.
func (a *Answerer) Zone() string { return a.zone }

// InZone reports whether a lower-cased, fully qualified name is in the
// cluster zone.
func (a *Answerer) InZone(lname string) bool { return dns.IsSubDomain(a.zone, lname) }

// Answer fills m, a reply to a query with question q (class IN), and
// reports true when the name is the server's to answer: anything in the
// cluster zone, and PTR questions for cluster IPs and published endpoints
// of headless Services. On false, m is untouched and the question belongs
// to the upstream servers.
func (a *Answerer) Answer(m *dns.Msg, q dns.Question) bool {
	lname := strings.ToLower(dns.Fqdn(q.Name))
	if a.InZone(lname) {
		r := a.zoneAnswer(q, lname, 0)
		r.apply(m, a)
		return true
	}
	if q.Qtype == dns.TypePTR {
		if ip, ok := ReverseAddr(lname); ok {
			if targets := a.idx.Reverse(ip); len(targets) > 0 {
				for _, t := range targets {
					name := t.Service + "." + t.Namespace + ".svc." + a.zone
					if t.Hostname != "" {
						name = t.Hostname + "." + name
					}
					m.Answer = append(m.Answer, &dns.PTR{Hdr: a.hdr(q.Name, dns.TypePTR), Ptr: strings.ToLower(name)})
				}
				m.Authoritative = true
				m.Rcode = dns.RcodeSuccess
				return true
			}
		}
	}
	return false
}

// result is an answer before it goes into a message.
type result struct {
	rcode  int
	answer []dns.RR
	extra  []dns.RR
	negSOA bool // NXDOMAIN or NODATA: the SOA goes into the authority section
}

func (r *result) apply(m *dns.Msg, a *Answerer) {
	m.Authoritative = true
	m.Rcode = r.rcode
	m.Answer = append(m.Answer, r.answer...)
	m.Extra = append(m.Extra, r.extra...)
	if r.negSOA || (r.rcode == dns.RcodeSuccess && len(r.answer) == 0) {
		m.Ns = append(m.Ns, a.soa())
	}
}

func nxdomain() result { return result{rcode: dns.RcodeNameError, negSOA: true} }
func nodata() result   { return result{rcode: dns.RcodeSuccess, negSOA: true} }

func (a *Answerer) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: a.cfg.TTL}
}

func (a *Answerer) soa() *dns.SOA {
	return &dns.SOA{Hdr: a.hdr(a.zone, dns.TypeSOA), Ns: a.nsName, Mbox: "hostmaster." + a.zone,
		Serial: uint32(a.idx.Generation()), Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: a.cfg.TTL}
}

// maxChain bounds CNAME chains between ExternalName Services in the zone.
const maxChain = 8

func (a *Answerer) zoneAnswer(q dns.Question, lname string, depth int) result {
	rel := strings.TrimSuffix(strings.TrimSuffix(lname, a.zone), ".")
	var labels []string
	if rel != "" {
		labels = strings.Split(rel, ".")
	}
	n := len(labels)
	switch {
	case n == 0:
		return a.apex(q)
	case n == 1 && labels[0] == "dns-version":
		if q.Qtype != dns.TypeTXT {
			return nodata()
		}
		return result{answer: []dns.RR{&dns.TXT{Hdr: a.hdr(q.Name, dns.TypeTXT), Txt: []string{SchemaVersion}}}}
	case n == 1 && labels[0] == "dns":
		return nodata() // the parent of ns.dns.<zone>: exists, holds nothing
	case n == 2 && labels[0] == "ns" && labels[1] == "dns":
		return a.addrs(q, q.Name, a.nsAddrs())
	case labels[n-1] == "svc":
		return a.svc(q, labels[:n-1], depth)
	case labels[n-1] == "pod":
		return a.pod(q, labels[:n-1])
	}
	return nxdomain()
}

func (a *Answerer) apex(q dns.Question) result {
	switch q.Qtype {
	case dns.TypeSOA:
		return result{answer: []dns.RR{a.soaAt(q.Name)}}
	case dns.TypeNS:
		r := result{answer: []dns.RR{&dns.NS{Hdr: a.hdr(q.Name, dns.TypeNS), Ns: a.nsName}}}
		for _, ip := range a.nsAddrs() {
			r.extra = append(r.extra, a.addrRR(a.nsName, ip))
		}
		return r
	}
	return nodata()
}

func (a *Answerer) soaAt(name string) *dns.SOA {
	s := a.soa()
	s.Hdr.Name = name
	return s
}

// nsAddrs are the addresses of ns.dns.<zone>: the cluster IPs of
// kube-system/kube-dns when that Service exists (where clients send their
// queries), else the configured ones.
func (a *Answerer) nsAddrs() []netip.Addr {
	if s := a.idx.Service("kube-system", "kube-dns"); s != nil && s.Kind == index.ClusterIP && len(s.ClusterIPs) > 0 {
		return s.ClusterIPs
	}
	return a.cfg.NSAddrs
}

func (a *Answerer) addrRR(name string, ip netip.Addr) dns.RR {
	if ip.Is4() {
		return &dns.A{Hdr: a.hdr(name, dns.TypeA), A: net.IP(ip.AsSlice())}
	}
	return &dns.AAAA{Hdr: a.hdr(name, dns.TypeAAAA), AAAA: net.IP(ip.AsSlice())}
}

// addrs answers A or AAAA at an existing name holding ips; any other type,
// or a family it lacks, is NODATA.
func (a *Answerer) addrs(q dns.Question, owner string, ips []netip.Addr) result {
	var r result
	seen := map[netip.Addr]bool{}
	for _, ip := range ips {
		if seen[ip] || !familyMatches(q.Qtype, ip) {
			continue
		}
		seen[ip] = true
		r.answer = append(r.answer, a.addrRR(owner, ip))
	}
	if len(r.answer) == 0 {
		return nodata()
	}
	return r
}

func familyMatches(qtype uint16, ip netip.Addr) bool {
	return (qtype == dns.TypeA && ip.Is4()) || (qtype == dns.TypeAAAA && ip.Is6() && !ip.Is4In6())
}

func (a *Answerer) svc(q dns.Question, labels []string, depth int) result {
	n := len(labels)
	switch n {
	case 0:
		return nodata() // svc.<zone>
	case 1:
		if a.idx.NamespaceExists(labels[0]) {
			return nodata()
		}
		return nxdomain()
	}
	ns, name := labels[n-1], labels[n-2]
	s := a.idx.Service(ns, name)
	if s == nil {
		return nxdomain()
	}
	switch n {
	case 2:
		return a.service(q, s, depth)
	case 3:
		if s.Kind != index.Headless {
			return nxdomain() // names below a ClusterIP or ExternalName Service do not exist
		}
		return a.endpointName(q, s, labels[0])
	case 4:
		port, proto := labels[0], labels[1]
		if len(port) < 2 || len(proto) < 2 || port[0] != '_' || proto[0] != '_' || s.Kind == index.ExternalName {
			return nxdomain()
		}
		return a.srvPort(q, s, port[1:], proto[1:])
	}
	return nxdomain()
}

func (a *Answerer) svcName(s *index.Service) string {
	return strings.ToLower(s.Name + "." + s.Namespace + ".svc." + a.zone)
}

// endpoint is one published address of a headless Service.
type endpoint struct {
	addr  netip.Addr
	host  string // the hostname label: its own, or the dashed address
	ports []index.Port
}

func (a *Answerer) endpoints(s *index.Service) []endpoint {
	var out []endpoint
	for _, sl := range a.idx.EndpointSlices(s.Namespace, s.Name) {
		for i := range sl.Endpoints {
			e := &sl.Endpoints[i]
			if !index.Published(s, e) {
				continue
			}
			for _, ip := range e.Addresses {
				out = append(out, endpoint{addr: ip, host: index.Hostname(e, ip), ports: sl.Ports})
			}
		}
	}
	return out
}

func (a *Answerer) service(q dns.Question, s *index.Service, depth int) result {
	switch s.Kind {
	case index.ExternalName:
		return a.externalName(q, s, depth)
	case index.ClusterIP:
		if q.Qtype == dns.TypeSRV {
			return a.srvRecords(q, s, s.Ports, nil)
		}
		return a.addrs(q, q.Name, s.ClusterIPs)
	}
	eps := a.endpoints(s)
	if len(eps) == 0 {
		// The specification: a headless Service without ready endpoints
		// answers NXDOMAIN (CoreDNS agrees).
		return nxdomain()
	}
	if q.Qtype == dns.TypeSRV {
		return a.srvRecords(q, s, nil, eps)
	}
	ips := make([]netip.Addr, len(eps))
	for i, e := range eps {
		ips[i] = e.addr
	}
	return a.addrs(q, q.Name, ips)
}

func (a *Answerer) externalName(q dns.Question, s *index.Service, depth int) result {
	target := dns.Fqdn(s.ExternalName)
	r := result{answer: []dns.RR{&dns.CNAME{Hdr: a.hdr(q.Name, dns.TypeCNAME), Target: target}}}
	ltarget := strings.ToLower(target)
	if q.Qtype == dns.TypeCNAME || !a.InZone(ltarget) || depth >= maxChain {
		return r
	}
	// The target is ours: answer for it as well, so that clients need not
	// ask again. The rcode is the last name's (RFC 6604).
	next := a.zoneAnswer(dns.Question{Name: target, Qtype: q.Qtype, Qclass: q.Qclass}, ltarget, depth+1)
	r.rcode = next.rcode
	r.answer = append(r.answer, next.answer...)
	r.extra = next.extra
	r.negSOA = next.negSOA
	return r
}

func (a *Answerer) endpointName(q dns.Question, s *index.Service, host string) result {
	var ips []netip.Addr
	for _, e := range a.endpoints(s) {
		if e.host == host {
			ips = append(ips, e.addr)
		}
	}
	if len(ips) == 0 {
		return nxdomain()
	}
	return a.addrs(q, q.Name, ips)
}

// srvPort answers _<port>._<proto>.<svc>.<ns>.svc.<zone>.
func (a *Answerer) srvPort(q dns.Question, s *index.Service, port, proto string) result {
	match := func(p index.Port) bool {
		return p.Name != "" && strings.EqualFold(p.Name, port) && strings.EqualFold(p.Protocol, proto)
	}
	if s.Kind == index.ClusterIP {
		var ports []index.Port
		for _, p := range s.Ports {
			if match(p) {
				ports = append(ports, p)
			}
		}
		if len(ports) == 0 {
			return nxdomain()
		}
		if q.Qtype != dns.TypeSRV {
			return nodata()
		}
		return a.srvRecords(q, s, ports, nil)
	}
	var eps []endpoint
	for _, e := range a.endpoints(s) {
		var ports []index.Port
		for _, p := range e.ports {
			if match(p) {
				ports = append(ports, p)
			}
		}
		if len(ports) > 0 {
			e.ports = ports
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nxdomain()
	}
	if q.Qtype != dns.TypeSRV {
		return nodata()
	}
	return a.srvRecords(q, s, nil, eps)
}

// srvRecords builds SRV records for the ports of a ClusterIP Service
// (target: the Service's name) or for each endpoint and port of a headless
// one (target: the endpoint's name), with the targets' addresses in the
// additional section. All have priority 0 and share the weight, as CoreDNS
// does.
func (a *Answerer) srvRecords(q dns.Question, s *index.Service, ports []index.Port, eps []endpoint) result {
	type srv struct {
		target string
		port   int32
		addr   netip.Addr
	}
	var recs []srv
	svcName := a.svcName(s)
	if s.Kind == index.ClusterIP {
		for _, p := range ports {
			recs = append(recs, srv{target: svcName, port: p.Port})
		}
	} else {
		for _, e := range eps {
			for _, p := range e.ports {
				recs = append(recs, srv{target: e.host + "." + svcName, port: p.Port, addr: e.addr})
			}
		}
	}
	if len(recs) == 0 {
		return nodata() // the name exists (a Service without ports)
	}
	type tp struct {
		target string
		port   int32
	}
	seen := map[tp]bool{}
	unique := recs[:0]
	for _, r := range recs {
		if !seen[tp{r.target, r.port}] {
			seen[tp{r.target, r.port}] = true
			unique = append(unique, r)
		}
	}
	weight := uint16(100 / len(unique))
	if weight == 0 {
		weight = 1
	}
	var out result
	glue := map[string]bool{}
	for _, r := range unique {
		out.answer = append(out.answer, &dns.SRV{Hdr: a.hdr(q.Name, dns.TypeSRV), Priority: 0, Weight: weight,
			Port: uint16(r.port), Target: r.target})
		if s.Kind == index.ClusterIP {
			if !glue[r.target] {
				glue[r.target] = true
				for _, ip := range s.ClusterIPs {
					out.extra = append(out.extra, a.addrRR(r.target, ip))
				}
			}
			continue
		}
		key := r.target + "/" + r.addr.String()
		if !glue[key] {
			glue[key] = true
			out.extra = append(out.extra, a.addrRR(r.target, r.addr))
		}
	}
	return out
}

// pod answers <a-b-c-d>.<ns>.pod.<zone> and the names above it.
func (a *Answerer) pod(q dns.Question, labels []string) result {
	if len(labels) == 0 {
		return nodata() // pod.<zone>
	}
	if a.cfg.Pods == PodsDisabled {
		return nxdomain()
	}
	ns := labels[len(labels)-1]
	if !a.idx.NamespaceExists(ns) {
		return nxdomain()
	}
	switch len(labels) {
	case 1:
		return nodata()
	case 2:
		ip, ok := podIP(labels[0])
		if !ok {
			return nxdomain()
		}
		if a.cfg.Pods == PodsVerified && !a.idx.PodIPExists(ns, ip) {
			return nxdomain()
		}
		return a.addrs(q, q.Name, []netip.Addr{ip})
	}
	return nxdomain()
}

// podIP reads the dashed address of a pod record: a-b-c-d for IPv4, the
// IPv6 text with colons as dashes otherwise (as CoreDNS reads it).
func podIP(label string) (netip.Addr, bool) {
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip, true
}

// ReverseAddr reads the address of a full reverse name
// (d.c.b.a.in-addr.arpa. or 32 nibbles of ip6.arpa.), lower-cased.
func ReverseAddr(lname string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(lname, ".in-addr.arpa."); ok {
		parts := strings.Split(rest, ".")
		if len(parts) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 8)
			if err != nil || (len(p) > 1 && p[0] == '0') {
				return netip.Addr{}, false
			}
			b[3-i] = byte(v)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(lname, ".ip6.arpa."); ok {
		parts := strings.Split(rest, ".")
		if len(parts) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, p := range parts {
			if len(p) != 1 {
				return netip.Addr{}, false
			}
			v, err := strconv.ParseUint(p, 16, 8)
			if err != nil {
				return netip.Addr{}, false
			}
			pos := 31 - i
			if pos%2 == 0 {
				b[pos/2] |= byte(v) << 4
			} else {
				b[pos/2] |= byte(v)
			}
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}
