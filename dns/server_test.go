package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"portal.dev/portal/dns/index"
)

// startTestServer runs a server without informers on 127.0.0.1 and a free
// port, its index filled by fill.
func startTestServer(t *testing.T, o Options, fill func(*index.Index)) (*Server, string) {
	t.Helper()
	s, err := New(nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if fill != nil {
		fill(s.idx)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.listening:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, fmt.Sprintf("127.0.0.1:%d", s.port)
}

func mustAddrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func fillCluster(x *index.Index) {
	x.SetNamespace("default")
	x.SetService(&index.Service{Namespace: "default", Name: "web", ClusterIPs: mustAddrs("10.96.0.10"),
		Ports: []index.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
	x.SetService(&index.Service{Namespace: "default", Name: "big", Kind: index.Headless})
	var eps []index.Endpoint
	for i := range 100 {
		eps = append(eps, index.Endpoint{Addresses: mustAddrs(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)), Ready: true})
	}
	x.SetEndpointSlice(&index.EndpointSlice{Namespace: "default", Name: "big-1", Service: "big", Endpoints: eps})
}

func exchange(t *testing.T, net, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: net, Timeout: 5 * time.Second, UDPSize: 65535}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("exchange %s over %s: %v", m.Question[0].Name, net, err)
	}
	return resp
}

func TestServe(t *testing.T) {
	up := startUpstream(t)
	_, addr := startTestServer(t, Options{Upstream: []string{up}}, fillCluster)

	type check func(t *testing.T, resp *dns.Msg)
	rcode := func(want int) check {
		return func(t *testing.T, resp *dns.Msg) {
			if resp.Rcode != want {
				t.Errorf("rcode: got %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[want])
			}
		}
	}
	answers := func(want int) check {
		return func(t *testing.T, resp *dns.Msg) {
			if len(resp.Answer) != want {
				t.Errorf("answers: got %d, want %d", len(resp.Answer), want)
			}
		}
	}
	truncated := func(want bool) check {
		return func(t *testing.T, resp *dns.Msg) {
			if resp.Truncated != want {
				t.Errorf("TC: got %v, want %v", resp.Truncated, want)
			}
		}
	}
	opt := func(wantSize int) check {
		return func(t *testing.T, resp *dns.Msg) {
			o := resp.IsEdns0()
			switch {
			case wantSize == 0 && o != nil:
				t.Errorf("OPT: got one, want none")
			case wantSize != 0 && o == nil:
				t.Errorf("OPT: got none, want one")
			case wantSize != 0 && int(o.UDPSize()) != wantSize:
				t.Errorf("OPT size: got %d, want %d", o.UDPSize(), wantSize)
			}
		}
	}
	fits := func(max int) check {
		return func(t *testing.T, resp *dns.Msg) {
			resp.Compress = true // as the server packed it
			b, _ := resp.Pack()
			if len(b) > max {
				t.Errorf("size: got %d bytes, want <= %d", len(b), max)
			}
		}
	}
	q := func(name string, qtype uint16, mod ...func(*dns.Msg)) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		for _, f := range mod {
			f(m)
		}
		return m
	}
	edns := func(size uint16) func(*dns.Msg) { return func(m *dns.Msg) { m.SetEdns0(size, false) } }

	for _, tc := range []struct {
		name   string
		net    string
		msg    *dns.Msg
		checks []check
	}{
		{"A over UDP", "udp", q("web.default.svc.cluster.local.", dns.TypeA), []check{rcode(0), answers(1), opt(0)}},
		{"A again (cached), other case", "udp", q("WEB.default.svc.cluster.local.", dns.TypeA), []check{rcode(0), answers(1),
			func(t *testing.T, resp *dns.Msg) {
				if resp.Question[0].Name != "WEB.default.svc.cluster.local." || resp.Answer[0].Header().Name != "WEB.default.svc.cluster.local." {
					t.Errorf("names: got %q, %q, want the question's case", resp.Question[0].Name, resp.Answer[0].Header().Name)
				}
			}}},
		{"A over TCP", "tcp", q("web.default.svc.cluster.local.", dns.TypeA), []check{rcode(0), answers(1)}},
		{"NXDOMAIN", "udp", q("nope.default.svc.cluster.local.", dns.TypeA), []check{rcode(dns.RcodeNameError), answers(0)}},
		{"100 addresses truncated at 512 without EDNS", "udp", q("big.default.svc.cluster.local.", dns.TypeA),
			[]check{rcode(0), truncated(true), fits(512), opt(0)}},
		{"100 addresses truncated at the EDNS size", "udp", q("big.default.svc.cluster.local.", dns.TypeA, edns(1232)),
			[]check{rcode(0), truncated(true), fits(1232), opt(maxUDPSize)}},
		{"client EDNS size above ours is capped", "udp", q("big.default.svc.cluster.local.", dns.TypeA, edns(4096)),
			[]check{truncated(true), fits(maxUDPSize)}},
		{"all 100 over TCP, compressed", "tcp", q("big.default.svc.cluster.local.", dns.TypeA),
			[]check{rcode(0), truncated(false), answers(100), fits(100*16 + 100)}},
		{"EDNS echoed", "udp", q("web.default.svc.cluster.local.", dns.TypeA, edns(1232)), []check{rcode(0), opt(maxUDPSize)}},
		{"EDNS version 1 is BADVERS", "udp", q("web.default.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().SetVersion(1)
		}), []check{rcode(dns.RcodeBadVers)}},
		{"NOTIFY is NOTIMP", "udp", q("cluster.local.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }),
			[]check{rcode(dns.RcodeNotImplemented)}},
		{"CHAOS is REFUSED", "udp", q("version.bind.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }),
			[]check{rcode(dns.RcodeRefused)}},
		{"AXFR is REFUSED", "tcp", q("cluster.local.", dns.TypeAXFR), []check{rcode(dns.RcodeRefused)}},
		{"forwarded", "udp", q("www.example.", dns.TypeA), []check{rcode(0), answers(1)}},
		{"forwarded over TCP", "tcp", q("www.example.", dns.TypeA), []check{rcode(0), answers(1)}},
		{"forwarded NXDOMAIN", "udp", q("nx.example.", dns.TypeA), []check{rcode(dns.RcodeNameError)}},
		{"reverse of an unknown address is forwarded", "udp", q("9.9.9.9.in-addr.arpa.", dns.TypePTR), []check{rcode(dns.RcodeNameError)}},
		{"reverse of a cluster IP", "udp", q("10.0.96.10.in-addr.arpa.", dns.TypePTR), []check{rcode(0), answers(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := exchange(t, tc.net, addr, tc.msg)
			if resp.Id != tc.msg.Id {
				t.Errorf("ID: got %d, want %d", resp.Id, tc.msg.Id)
			}
			for _, c := range tc.checks {
				c(t, resp)
			}
		})
	}
}

func TestServeNoUpstreamRefuses(t *testing.T) {
	_, addr := startTestServer(t, Options{Upstream: []string{"none"}}, fillCluster)
	m := new(dns.Msg)
	m.SetQuestion("www.example.", dns.TypeA)
	if resp := exchange(t, "udp", addr, m); resp.Rcode != dns.RcodeRefused {
		t.Errorf("rcode: got %s, want REFUSED", dns.RcodeToString[resp.Rcode])
	}
}

func TestServeMalformed(t *testing.T) {
	_, addr := startTestServer(t, Options{Upstream: []string{"none"}}, fillCluster)
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A header claiming a question that is not there: FORMERR.
	c.Write([]byte{0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'w'})
	buf := make([]byte, 512)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil || m.Id != 0xABCD || m.Rcode != dns.RcodeFormatError {
		t.Errorf("got %v (%v), want FORMERR for id 0xabcd", m, err)
	}
	// The server still answers.
	q := new(dns.Msg)
	q.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	if resp := exchange(t, "udp", addr, q); len(resp.Answer) != 1 {
		t.Errorf("after garbage: got %v, want an answer", resp)
	}
}

func TestServeMetricsAndHealth(t *testing.T) {
	s, addr := startTestServer(t, Options{Upstream: []string{"none"}}, fillCluster)
	m := new(dns.Msg)
	m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	exchange(t, "udp", addr, m)
	m.SetQuestion("nope.default.svc.cluster.local.", dns.TypeA)
	exchange(t, "udp", addr, m)
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.Metric {
			var labels []string
			for _, l := range mt.Label {
				if l.GetValue() != "" && l.GetName() != "server" && l.GetName() != "zone" {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case mt.Counter != nil:
				got[key] = mt.Counter.GetValue()
			case mt.Histogram != nil:
				got[key] = float64(mt.Histogram.GetSampleCount())
			}
		}
	}
	for key, want := range map[string]float64{
		"coredns_dns_requests_total{family=1,proto=udp,type=A}":         2,
		"coredns_dns_responses_total{plugin=kubernetes,rcode=NOERROR}":  1,
		"coredns_dns_responses_total{plugin=kubernetes,rcode=NXDOMAIN}": 1,
		"coredns_dns_request_duration_seconds{type=A}":                  2,
	} {
		if got[key] != want {
			t.Errorf("%s: got %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
}

// startUpstream runs a miekg/dns server on 127.0.0.1 (UDP and TCP) that
// knows www.example. and nothing else, and returns its address.
func startUpstream(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name == "www.example." {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "www.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})
	us := &dns.Server{PacketConn: pc, Handler: h}
	ts := &dns.Server{Listener: l, Handler: h}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	t.Cleanup(func() { us.Shutdown(); ts.Shutdown() })
	return pc.LocalAddr().String()
}
