package answer

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"portal.dev/portal/dns/index"
)

// testCase is one question and the reply it must get, in the style of
// CoreDNS's test.Case: records are compared as zone-file text.
type testCase struct {
	name   string
	qname  string
	qtype  uint16
	rcode  int
	answer []string
	ns     []string
	extra  []string
}

const soa = "cluster.local.\t5\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local. SERIAL 7200 1800 86400 5"

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// fixture is a cluster with a Service of every kind.
func fixture() *index.Index {
	x := &index.Index{}
	for _, ns := range []string{"default", "ns1", "kube-system", "empty"} {
		x.SetNamespace(ns)
	}
	x.SetService(&index.Service{Namespace: "ns1", Name: "web", Kind: index.ClusterIP, ClusterIPs: addrs("10.96.0.10"),
		Ports: []index.Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}, {Protocol: "TCP", Port: 9000}}})
	x.SetService(&index.Service{Namespace: "ns1", Name: "dual", Kind: index.ClusterIP, ClusterIPs: addrs("10.96.0.11", "fd00::11"),
		Ports: []index.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
	x.SetService(&index.Service{Namespace: "ns1", Name: "v6only", Kind: index.ClusterIP, ClusterIPs: addrs("fd00::12"),
		Ports: []index.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
	x.SetService(&index.Service{Namespace: "ns1", Name: "hl", Kind: index.Headless,
		Ports: []index.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
	x.SetEndpointSlice(&index.EndpointSlice{Namespace: "ns1", Name: "hl-abc", Service: "hl",
		Ports: []index.Port{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints: []index.Endpoint{
			{Addresses: addrs("10.1.0.1"), Hostname: "pet-0", Ready: true},
			{Addresses: addrs("10.1.0.2"), Ready: true},
			{Addresses: addrs("10.1.0.3"), Hostname: "sick", Ready: false},
		}})
	x.SetEndpointSlice(&index.EndpointSlice{Namespace: "ns1", Name: "hl-v6", Service: "hl",
		Ports:     []index.Port{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints: []index.Endpoint{{Addresses: addrs("fd00::1:2"), Ready: true}}})
	x.SetService(&index.Service{Namespace: "ns1", Name: "pub", Kind: index.Headless, PublishNotReady: true})
	x.SetEndpointSlice(&index.EndpointSlice{Namespace: "ns1", Name: "pub-1", Service: "pub",
		Endpoints: []index.Endpoint{{Addresses: addrs("10.2.0.1"), Hostname: "a", Ready: false}}})
	x.SetService(&index.Service{Namespace: "ns1", Name: "nobody", Kind: index.Headless})
	x.SetService(&index.Service{Namespace: "ns1", Name: "ext", Kind: index.ExternalName, ExternalName: "www.example.com"})
	x.SetService(&index.Service{Namespace: "ns1", Name: "inext", Kind: index.ExternalName, ExternalName: "web.ns1.svc.cluster.local"})
	x.SetService(&index.Service{Namespace: "ns1", Name: "loop", Kind: index.ExternalName, ExternalName: "loop.ns1.svc.cluster.local"})
	x.SetService(&index.Service{Namespace: "ns1", Name: "dangling", Kind: index.ExternalName, ExternalName: "gone.ns1.svc.cluster.local"})
	return x
}

func run(t *testing.T, a *Answerer, cases []testCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := new(dns.Msg)
			req.SetQuestion(tc.qname, tc.qtype)
			m := new(dns.Msg)
			m.SetReply(req)
			if !a.Answer(m, req.Question[0]) {
				t.Fatalf("Answer(%s %s): not ours, want an answer", tc.qname, dns.TypeToString[tc.qtype])
			}
			if m.Rcode != tc.rcode {
				t.Errorf("rcode: got %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if !m.Authoritative {
				t.Errorf("AA: got false, want true")
			}
			check(t, "answer", m.Answer, tc.answer)
			check(t, "authority", m.Ns, tc.ns)
			check(t, "additional", m.Extra, tc.extra)
		})
	}
}

func check(t *testing.T, section string, got []dns.RR, want []string) {
	t.Helper()
	var g []string
	for _, rr := range got {
		s := rr.String()
		if soa, ok := rr.(*dns.SOA); ok {
			s = strings.Replace(s, fmt.Sprint(" ", soa.Serial, " "), " SERIAL ", 1)
		}
		g = append(g, s)
	}
	slices.Sort(g)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s:\ngot  %q\nwant %q", section, g, w)
	}
}

func TestAnswer(t *testing.T) {
	a := New(Config{Zone: "cluster.local", TTL: 5, NSAddrs: addrs("10.0.0.53")}, fixture())
	run(t, a, []testCase{
		// ClusterIP Services.
		{name: "clusterIP A", qname: "web.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"web.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.10"}},
		{name: "clusterIP AAAA is NODATA", qname: "web.ns1.svc.cluster.local.", qtype: dns.TypeAAAA, ns: []string{soa}},
		{name: "clusterIP TXT is NODATA", qname: "web.ns1.svc.cluster.local.", qtype: dns.TypeTXT, ns: []string{soa}},
		{name: "case-insensitive, echoes the question's case", qname: "WeB.Ns1.SVC.Cluster.Local.", qtype: dns.TypeA,
			answer: []string{"WeB.Ns1.SVC.Cluster.Local.\t5\tIN\tA\t10.96.0.10"}},
		{name: "dual-stack A", qname: "dual.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"dual.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.11"}},
		{name: "dual-stack AAAA", qname: "dual.ns1.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"dual.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::11"}},
		{name: "IPv6-only A is NODATA", qname: "v6only.ns1.svc.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
		{name: "SRV named port", qname: "_http._tcp.web.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_http._tcp.web.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 80 web.ns1.svc.cluster.local."},
			extra:  []string{"web.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.10"}},
		{name: "SRV udp port, case-insensitive", qname: "_DNS._UDP.web.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_DNS._UDP.web.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 53 web.ns1.svc.cluster.local."},
			extra:  []string{"web.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.10"}},
		{name: "SRV wrong protocol is NXDOMAIN", qname: "_http._udp.web.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "SRV name without underscores is NXDOMAIN", qname: "http.tcp.web.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "SRV name, A question is NODATA", qname: "_http._tcp.web.ns1.svc.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
		{name: "SRV on the service name lists every port", qname: "web.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{
				"web.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 80 web.ns1.svc.cluster.local.",
				"web.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 53 web.ns1.svc.cluster.local.",
				"web.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 9000 web.ns1.svc.cluster.local.",
			},
			extra: []string{"web.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.10"}},
		{name: "dual-stack SRV glue has both families", qname: "_http._tcp.dual.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_http._tcp.dual.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 80 dual.ns1.svc.cluster.local."},
			extra:  []string{"dual.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.11", "dual.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::11"}},
		{name: "names below a ClusterIP service do not exist", qname: "x.web.ns1.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},

		// Headless Services.
		{name: "headless A: ready endpoints only", qname: "hl.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.1", "hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.2"}},
		{name: "headless AAAA", qname: "hl.ns1.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"hl.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::1:2"}},
		{name: "headless endpoint hostname", qname: "pet-0.hl.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"pet-0.hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.1"}},
		{name: "headless endpoint hostname AAAA is NODATA", qname: "pet-0.hl.ns1.svc.cluster.local.", qtype: dns.TypeAAAA,
			ns: []string{soa}},
		{name: "headless endpoint without hostname: dashed IPv4", qname: "10-1-0-2.hl.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-1-0-2.hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.2"}},
		{name: "headless endpoint without hostname: dashed IPv6", qname: "fd00--1-2.hl.ns1.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"fd00--1-2.hl.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::1:2"}},
		{name: "not-ready endpoint hostname is NXDOMAIN", qname: "sick.hl.ns1.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "dashed IP of an endpoint with a hostname is NXDOMAIN", qname: "10-1-0-1.hl.ns1.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "headless SRV: one per endpoint, A in additional", qname: "_http._tcp.hl.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{
				"_http._tcp.hl.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 8080 pet-0.hl.ns1.svc.cluster.local.",
				"_http._tcp.hl.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 8080 10-1-0-2.hl.ns1.svc.cluster.local.",
				"_http._tcp.hl.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 8080 fd00--1-2.hl.ns1.svc.cluster.local.",
			},
			extra: []string{
				"pet-0.hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.1",
				"10-1-0-2.hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.2",
				"fd00--1-2.hl.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::1:2",
			}},
		{name: "headless SRV on the service name", qname: "hl.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{
				"hl.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 8080 pet-0.hl.ns1.svc.cluster.local.",
				"hl.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 8080 10-1-0-2.hl.ns1.svc.cluster.local.",
				"hl.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 33 8080 fd00--1-2.hl.ns1.svc.cluster.local.",
			},
			extra: []string{
				"pet-0.hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.1",
				"10-1-0-2.hl.ns1.svc.cluster.local.\t5\tIN\tA\t10.1.0.2",
				"fd00--1-2.hl.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::1:2",
			}},
		{name: "publishNotReadyAddresses publishes not-ready endpoints", qname: "a.pub.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"a.pub.ns1.svc.cluster.local.\t5\tIN\tA\t10.2.0.1"}},
		{name: "headless without ports: SRV is NODATA", qname: "pub.ns1.svc.cluster.local.", qtype: dns.TypeSRV, ns: []string{soa}},
		{name: "headless without endpoints is NXDOMAIN", qname: "nobody.ns1.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},

		// ExternalName Services.
		{name: "ExternalName CNAME", qname: "ext.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"ext.ns1.svc.cluster.local.\t5\tIN\tCNAME\twww.example.com."}},
		{name: "ExternalName CNAME question", qname: "ext.ns1.svc.cluster.local.", qtype: dns.TypeCNAME,
			answer: []string{"ext.ns1.svc.cluster.local.\t5\tIN\tCNAME\twww.example.com."}},
		{name: "ExternalName into the zone carries the target's records", qname: "inext.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"inext.ns1.svc.cluster.local.\t5\tIN\tCNAME\tweb.ns1.svc.cluster.local.",
				"web.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.10"}},
		{name: "ExternalName to a missing name in the zone: NXDOMAIN of the target", qname: "dangling.ns1.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, answer: []string{"dangling.ns1.svc.cluster.local.\t5\tIN\tCNAME\tgone.ns1.svc.cluster.local."}, ns: []string{soa}},
		{name: "ExternalName loop stops", qname: "loop.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: slices.Repeat([]string{"loop.ns1.svc.cluster.local.\t5\tIN\tCNAME\tloop.ns1.svc.cluster.local."}, maxChain+1)},
		{name: "names below an ExternalName do not exist", qname: "x.ext.ns1.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "no SRV below an ExternalName", qname: "_http._tcp.ext.ns1.svc.cluster.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: []string{soa}},

		// Names that do not exist, and names that exist without records.
		{name: "missing service", qname: "nope.ns1.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "missing namespace", qname: "web.nope.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "existing namespace is NODATA", qname: "empty.svc.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
		{name: "missing namespace name is NXDOMAIN", qname: "nope.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "svc.<zone> is NODATA", qname: "svc.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
		{name: "unknown label under the zone", qname: "foo.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "too deep", qname: "a.b._http._tcp.web.ns1.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soa}},

		// Zone apex and special names.
		{name: "SOA at the apex", qname: "cluster.local.", qtype: dns.TypeSOA, answer: []string{soa}},
		{name: "NS at the apex with glue", qname: "cluster.local.", qtype: dns.TypeNS,
			answer: []string{"cluster.local.\t5\tIN\tNS\tns.dns.cluster.local."},
			extra:  []string{"ns.dns.cluster.local.\t5\tIN\tA\t10.0.0.53"}},
		{name: "A at the apex is NODATA", qname: "cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
		{name: "ns.dns name", qname: "ns.dns.cluster.local.", qtype: dns.TypeA,
			answer: []string{"ns.dns.cluster.local.\t5\tIN\tA\t10.0.0.53"}},
		{name: "dns-version TXT", qname: "dns-version.cluster.local.", qtype: dns.TypeTXT,
			answer: []string{"dns-version.cluster.local.\t5\tIN\tTXT\t\"1.1.0\""}},
		{name: "dns-version A is NODATA", qname: "dns-version.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},

		// Pod records (insecure).
		{name: "pod A", qname: "10-244-1-7.ns1.pod.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-244-1-7.ns1.pod.cluster.local.\t5\tIN\tA\t10.244.1.7"}},
		{name: "pod AAAA", qname: "fd00--7.ns1.pod.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"fd00--7.ns1.pod.cluster.local.\t5\tIN\tAAAA\tfd00::7"}},
		{name: "pod IPv4 AAAA is NODATA", qname: "10-244-1-7.ns1.pod.cluster.local.", qtype: dns.TypeAAAA, ns: []string{soa}},
		{name: "pod in a missing namespace", qname: "10-244-1-7.nope.pod.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "pod name that is no IP", qname: "10-244-1-300.ns1.pod.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "pod namespace is NODATA", qname: "ns1.pod.cluster.local.", qtype: dns.TypeA, ns: []string{soa}},
	})
}

func TestAnswerTTL(t *testing.T) {
	a := New(Config{Zone: "cluster.local.", TTL: 30}, fixture())
	run(t, a, []testCase{
		{name: "configured TTL", qname: "web.ns1.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"web.ns1.svc.cluster.local.\t30\tIN\tA\t10.96.0.10"}},
		{name: "negative TTL", qname: "nope.ns1.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			ns: []string{"cluster.local.\t30\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local. SERIAL 7200 1800 86400 30"}},
	})
}

func TestAnswerPodModes(t *testing.T) {
	x := fixture()
	x.SetPod("ns1", "p", addrs("10.244.1.7"))
	verified := New(Config{Zone: "cluster.local", TTL: 5, Pods: PodsVerified}, x)
	run(t, verified, []testCase{
		{name: "verified: pod exists", qname: "10-244-1-7.ns1.pod.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-244-1-7.ns1.pod.cluster.local.\t5\tIN\tA\t10.244.1.7"}},
		{name: "verified: no such pod", qname: "10-244-1-8.ns1.pod.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "verified: pod in another namespace", qname: "10-244-1-7.default.pod.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
	})
	disabled := New(Config{Zone: "cluster.local", TTL: 5, Pods: PodsDisabled}, x)
	run(t, disabled, []testCase{
		{name: "disabled", qname: "10-244-1-7.ns1.pod.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
	})
}

func TestAnswerNSGlueFromKubeDNS(t *testing.T) {
	x := fixture()
	x.SetService(&index.Service{Namespace: "kube-system", Name: "kube-dns", Kind: index.ClusterIP, ClusterIPs: addrs("10.96.0.53")})
	a := New(Config{Zone: "cluster.local", TTL: 5, NSAddrs: addrs("127.0.0.1")}, x)
	run(t, a, []testCase{
		{name: "NS glue is the kube-dns cluster IP", qname: "cluster.local.", qtype: dns.TypeNS,
			answer: []string{"cluster.local.\t5\tIN\tNS\tns.dns.cluster.local."},
			extra:  []string{"ns.dns.cluster.local.\t5\tIN\tA\t10.96.0.53"}},
	})
}

func TestReverse(t *testing.T) {
	a := New(Config{Zone: "cluster.local", TTL: 5}, fixture())
	run(t, a, []testCase{
		{name: "cluster IP", qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"10.0.96.10.in-addr.arpa.\t5\tIN\tPTR\tweb.ns1.svc.cluster.local."}},
		{name: "IPv6 cluster IP", qname: dnsReverse("fd00::11"), qtype: dns.TypePTR,
			answer: []string{dnsReverse("fd00::11") + "\t5\tIN\tPTR\tdual.ns1.svc.cluster.local."}},
		{name: "headless endpoint with hostname", qname: "1.0.1.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"1.0.1.10.in-addr.arpa.\t5\tIN\tPTR\tpet-0.hl.ns1.svc.cluster.local."}},
		{name: "headless endpoint without hostname", qname: "2.0.1.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"2.0.1.10.in-addr.arpa.\t5\tIN\tPTR\t10-1-0-2.hl.ns1.svc.cluster.local."}},
		{name: "IPv6 headless endpoint", qname: dnsReverse("fd00::1:2"), qtype: dns.TypePTR,
			answer: []string{dnsReverse("fd00::1:2") + "\t5\tIN\tPTR\tfd00--1-2.hl.ns1.svc.cluster.local."}},
	})
	for _, name := range []string{"3.0.1.10.in-addr.arpa.", "9.9.9.9.in-addr.arpa.", "0.1.10.in-addr.arpa.", "01.0.1.10.in-addr.arpa."} {
		t.Run("not ours: "+name, func(t *testing.T) {
			req := new(dns.Msg)
			req.SetQuestion(name, dns.TypePTR)
			if a.Answer(new(dns.Msg), req.Question[0]) {
				t.Errorf("Answer(%s PTR): got ours, want it forwarded", name)
			}
		})
	}
}

func dnsReverse(ip string) string {
	r, _ := dns.ReverseAddr(ip)
	return r
}

func TestReverseAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
	}{
		{"4.3.2.1.in-addr.arpa.", "1.2.3.4"},
		{dnsReverse("2001:db8::1"), "2001:db8::1"},
		{"4.3.2.in-addr.arpa.", ""},
		{"x.3.2.1.in-addr.arpa.", ""},
		{"256.3.2.1.in-addr.arpa.", ""},
		{"1.ip6.arpa.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip, ok := ReverseAddr(tc.name)
			got := ""
			if ok {
				got = ip.String()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOutOfZoneIsNotOurs(t *testing.T) {
	a := New(Config{Zone: "cluster.local", TTL: 5}, fixture())
	for _, name := range []string{"example.com.", "local.", "xcluster.local."} {
		if a.Answer(new(dns.Msg), dns.Question{Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET}) {
			t.Errorf("Answer(%s): got ours, want forwarded", name)
		}
	}
}
