package dns

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"

	"portal.dev/portal/dns/wire"
)

// FuzzServe feeds raw packets to the UDP packet handler. It must never
// panic; what miekg/dns cannot parse gets FORMERR or nothing; and the same
// packet answered twice (the second time from the packed-response cache)
// gets the same bytes.
func FuzzServe(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
		edns  bool
	}{
		{"web.default.svc.cluster.local.", dns.TypeA, false},
		{"WEB.default.svc.cluster.local.", dns.TypeA, true},
		{"_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV, true},
		{"big.default.svc.cluster.local.", dns.TypeA, false},
		{"10.0.96.10.in-addr.arpa.", dns.TypePTR, false},
		{"nope.default.svc.cluster.local.", dns.TypeAAAA, true},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		if q.edns {
			m.SetEdns0(1232, true)
		}
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Add([]byte{0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'w'})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1})

	s, err := New(nil, Options{Upstream: []string{"none"}})
	if err != nil {
		f.Fatal(err)
	}
	fillCluster(s.idx)
	if err := s.setupForwarder(); err != nil {
		f.Fatal(err)
	}
	s.markReady()
	w := newWorker(s)
	out1 := make([]byte, 4096)
	out2 := make([]byte, 4096)

	f.Fuzz(func(t *testing.T, pkt []byte) {
		in := append([]byte(nil), pkt...)
		resp1, fwd := w.handle(in, out1, famIPv4)
		if !bytes.Equal(in, pkt) {
			t.Fatalf("handle changed its input")
		}
		if fwd != nil {
			return // out of zone: the caller forwards it
		}
		if err := new(dns.Msg).Unpack(pkt); err != nil && resp1 != nil && wire.Rcode(resp1) != dns.RcodeFormatError {
			t.Fatalf("unparsable packet (%v): got rcode %d, want FORMERR or nothing", err, wire.Rcode(resp1))
		}
		if resp1 == nil {
			return
		}
		if err := new(dns.Msg).Unpack(resp1); err != nil {
			t.Fatalf("response does not parse: %v", err)
		}
		resp1 = append([]byte(nil), resp1...)
		resp2, _ := w.handle(in, out2, famIPv4)
		if !bytes.Equal(resp1, resp2) {
			t.Fatalf("second answer differs:\n%x\n%x", resp1, resp2)
		}
	})
}
