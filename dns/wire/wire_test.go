package wire

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"
)

func pack(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func query(name string, qtype uint16, edns func(*dns.Msg)) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x1234
	if edns != nil {
		edns(m)
	}
	return m
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		msg      func() []byte
		wantOK   bool
		wantSize int
		wantDO   bool
	}{
		{name: "plain", msg: func() []byte { return pack(t, query("Web.NS.svc.cluster.local.", dns.TypeA, nil)) }, wantOK: true, wantSize: 512},
		{name: "EDNS 4096 is capped", msg: func() []byte {
			return pack(t, query("web.ns.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(4096, true) }))
		}, wantOK: true, wantSize: MaxUDPSize, wantDO: true},
		{name: "EDNS 100 is raised to 512", msg: func() []byte {
			return pack(t, query("web.ns.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(100, false) }))
		}, wantOK: true, wantSize: 512},
		{name: "EDNS with a cookie option", msg: func() []byte {
			return pack(t, query("web.ns.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) {
				m.SetEdns0(1232, false)
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
			}))
		}, wantOK: true, wantSize: 1232},
		{name: "EDNS version 1 takes the slow path", msg: func() []byte {
			return pack(t, query("web.ns.svc.cluster.local.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }))
		}},
		{name: "response", msg: func() []byte {
			m := query("a.", dns.TypeA, nil)
			m.Response = true
			return pack(t, m)
		}},
		{name: "opcode NOTIFY", msg: func() []byte {
			m := query("a.", dns.TypeA, nil)
			m.Opcode = dns.OpcodeNotify
			return pack(t, m)
		}},
		{name: "two questions", msg: func() []byte {
			m := query("a.", dns.TypeA, nil)
			m.Question = append(m.Question, m.Question[0])
			return pack(t, m)
		}},
		{name: "trailing garbage", msg: func() []byte { return append(pack(t, query("a.", dns.TypeA, nil)), 0) }},
		{name: "truncated question", msg: func() []byte { b := pack(t, query("a.", dns.TypeA, nil)); return b[:len(b)-2] }},
		{name: "short", msg: func() []byte { return []byte{1, 2, 3} }},
		{name: "compression pointer in question", msg: func() []byte {
			return []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q Query
			key, ok := Parse(tc.msg(), &q, nil)
			if ok != tc.wantOK {
				t.Fatalf("ok: got %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				return
			}
			if got := q.MaxResponse(); got != tc.wantSize {
				t.Errorf("MaxResponse: got %d, want %d", got, tc.wantSize)
			}
			if q.DO != tc.wantDO {
				t.Errorf("DO: got %v, want %v", q.DO, tc.wantDO)
			}
			if q.ID != 0x1234 {
				t.Errorf("ID: got %#x, want 0x1234", q.ID)
			}
			if bytes.ContainsAny(key[:q.NameEnd-12], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				t.Errorf("key %q: got upper case, want lower", key)
			}
		})
	}
}

func TestKeyIgnoresCaseAndID(t *testing.T) {
	var q1, q2 Query
	a := query("Web.NS.svc.cluster.local.", dns.TypeA, nil)
	b := query("web.ns.SVC.cluster.local.", dns.TypeA, nil)
	b.Id = 99
	k1, _ := Parse(pack(t, a), &q1, nil)
	k2, _ := Parse(pack(t, b), &q2, nil)
	if !bytes.Equal(k1, k2) {
		t.Errorf("keys differ: %q vs %q", k1, k2)
	}
	c := query("web.ns.svc.cluster.local.", dns.TypeAAAA, nil)
	k3, _ := Parse(pack(t, c), &q2, nil)
	if bytes.Equal(k1, k3) {
		t.Errorf("A and AAAA keys are equal: %q", k1)
	}
}

func TestPatch(t *testing.T) {
	orig := query("web.ns.svc.cluster.local.", dns.TypeA, nil)
	resp := new(dns.Msg)
	resp.SetReply(orig)
	resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "web.ns.svc.cluster.local.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: []byte{10, 0, 0, 1}}}
	resp.Compress = true
	cached := pack(t, resp)

	next := query("WEB.ns.svc.cluster.local.", dns.TypeA, nil)
	next.Id = 0xBEEF
	next.RecursionDesired = false
	next.CheckingDisabled = true
	pkt := pack(t, next)
	var q Query
	if _, ok := Parse(pkt, &q, nil); !ok {
		t.Fatal("Parse: not ok")
	}
	if !SameQuestionName(cached, pkt, &q) {
		t.Fatal("SameQuestionName: got false, want true")
	}
	out := append([]byte(nil), cached...)
	Patch(out, pkt, &q)
	got := new(dns.Msg)
	if err := got.Unpack(out); err != nil {
		t.Fatal(err)
	}
	if got.Id != 0xBEEF || got.RecursionDesired || !got.CheckingDisabled || !got.Response {
		t.Errorf("header: got id %#x rd %v cd %v qr %v, want 0xbeef false true true", got.Id, got.RecursionDesired, got.CheckingDisabled, got.Response)
	}
	if got.Question[0].Name != "WEB.ns.svc.cluster.local." || got.Answer[0].Header().Name != "WEB.ns.svc.cluster.local." {
		t.Errorf("names: got %q / %q, want the query's case", got.Question[0].Name, got.Answer[0].Header().Name)
	}
}

func TestFormErr(t *testing.T) {
	out := make([]byte, 512)
	if got := FormErr([]byte{1, 2}, out); got != nil {
		t.Errorf("short packet: got %v, want drop", got)
	}
	resp := []byte{0, 1, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := FormErr(resp, out); got != nil {
		t.Errorf("a response: got %v, want drop", got)
	}
	got := FormErr([]byte{0xAB, 0xCD, 0x01, 0, 0, 9, 0, 0, 0, 0, 0, 0, 1, 2, 3}, out)
	m := new(dns.Msg)
	if err := m.Unpack(got); err != nil {
		t.Fatal(err)
	}
	if m.Id != 0xABCD || m.Rcode != dns.RcodeFormatError || !m.Response || !m.RecursionDesired {
		t.Errorf("got %v, want FORMERR to id 0xabcd", m)
	}
}
