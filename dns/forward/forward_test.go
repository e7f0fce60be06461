package forward

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// upstream is a miekg/dns server on 127.0.0.1 (UDP and TCP, same port)
// that answers with handler and counts the queries per transport.
type upstream struct {
	addr     string
	udp, tcp atomic.Int32
}

func startUpstream(t *testing.T, handler func(w dns.ResponseWriter, r *dns.Msg, tcp bool)) *upstream {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: pc.LocalAddr().String()}
	h := func(tcp bool) dns.HandlerFunc {
		return func(w dns.ResponseWriter, r *dns.Msg) {
			if tcp {
				u.tcp.Add(1)
			} else {
				u.udp.Add(1)
			}
			handler(w, r, tcp)
		}
	}
	us := &dns.Server{PacketConn: pc, Handler: h(false)}
	ts := &dns.Server{Listener: l, Handler: h(true)}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	t.Cleanup(func() { us.Shutdown(); ts.Shutdown() })
	return u
}

func a(name string, ttl uint32, ip string) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip)}
}

func TestForwardTruncatedRetriesOverTCP(t *testing.T) {
	u := startUpstream(t, func(w dns.ResponseWriter, r *dns.Msg, tcp bool) {
		m := new(dns.Msg)
		m.SetReply(r)
		if !tcp {
			m.Truncated = true
		} else {
			m.Answer = []dns.RR{a(r.Question[0].Name, 60, "192.0.2.1")}
		}
		w.WriteMsg(m)
	})
	f := New(Options{Upstreams: []string{u.addr}, CacheSize: 10})
	req := new(dns.Msg)
	req.SetQuestion("big.example.", dns.TypeA)
	resp, err := f.Forward(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Truncated || len(resp.Answer) != 1 || resp.Id != req.Id {
		t.Errorf("got %v, want the TCP answer with the client's ID", resp)
	}
	if u.udp.Load() != 1 || u.tcp.Load() != 1 {
		t.Errorf("queries: got udp %d tcp %d, want 1 and 1", u.udp.Load(), u.tcp.Load())
	}
}

func TestForwardCache(t *testing.T) {
	u := startUpstream(t, func(w dns.ResponseWriter, r *dns.Msg, tcp bool) {
		m := new(dns.Msg)
		m.SetReply(r)
		switch r.Question[0].Name {
		case "pos.example.":
			m.Answer = []dns.RR{a("pos.example.", 60, "192.0.2.1")}
		case "neg.example.":
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300},
				Ns: "ns.example.", Mbox: "h.example.", Minttl: 10}}
		case "nosoa.example.":
			m.Rcode = dns.RcodeNameError
		case "fail.example.":
			m.Rcode = dns.RcodeServerFailure
		}
		w.WriteMsg(m)
	})
	now := time.Unix(1000, 0)
	f := New(Options{Upstreams: []string{u.addr}, CacheSize: 10, Now: func() time.Time { return now }})
	ask := func(name string) *dns.Msg {
		t.Helper()
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypeA)
		resp, err := f.Forward(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	steps := []struct {
		name      string
		advance   time.Duration
		qname     string
		wantSent  int32 // upstream queries so far
		wantTTL   uint32
		wantRcode int
	}{
		{"positive: miss", 0, "pos.example.", 1, 60, dns.RcodeSuccess},
		{"positive: hit, TTL aged", 20 * time.Second, "pos.example.", 1, 40, dns.RcodeSuccess},
		{"positive: expired", 41 * time.Second, "pos.example.", 2, 60, dns.RcodeSuccess},
		{"negative: miss", 0, "neg.example.", 3, 300, dns.RcodeNameError},
		{"negative: hit within the SOA minimum", 9 * time.Second, "neg.example.", 3, 291, dns.RcodeNameError},
		{"negative: expired after the SOA minimum", 2 * time.Second, "neg.example.", 4, 300, dns.RcodeNameError},
		{"negative without SOA: not cached", 0, "nosoa.example.", 5, 0, dns.RcodeNameError},
		{"negative without SOA: asked again", 0, "nosoa.example.", 6, 0, dns.RcodeNameError},
		{"SERVFAIL: not cached", 0, "fail.example.", 7, 0, dns.RcodeServerFailure},
		{"SERVFAIL: asked again", 0, "fail.example.", 8, 0, dns.RcodeServerFailure},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			now = now.Add(st.advance)
			resp := ask(st.qname)
			if resp.Rcode != st.wantRcode {
				t.Errorf("rcode: got %d, want %d", resp.Rcode, st.wantRcode)
			}
			if got := u.udp.Load(); got != st.wantSent {
				t.Errorf("upstream queries: got %d, want %d", got, st.wantSent)
			}
			var ttl uint32
			if len(resp.Answer) > 0 {
				ttl = resp.Answer[0].Header().Ttl
			} else if len(resp.Ns) > 0 {
				ttl = resp.Ns[0].Header().Ttl
			}
			if ttl != st.wantTTL {
				t.Errorf("TTL: got %d, want %d", ttl, st.wantTTL)
			}
		})
	}
	if hits := f.Counters.CacheHitsSuccess.Load() + f.Counters.CacheHitsDenial.Load(); hits != 2 {
		t.Errorf("cache hits: got %d, want 2", hits)
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := NewCache(3, time.Hour, time.Now)
	for _, n := range []string{"a.", "b.", "c.", "d.", "e."} {
		req := new(dns.Msg)
		req.SetQuestion(n, dns.TypeA)
		resp := new(dns.Msg)
		resp.SetReply(req)
		resp.Answer = []dns.RR{a(n, 60, "192.0.2.1")}
		c.Put(req, resp)
	}
	if got := c.Len(); got != 3 {
		t.Errorf("entries: got %d, want 3", got)
	}
}

func TestForwardNextUpstreamOnFailure(t *testing.T) {
	good := startUpstream(t, func(w dns.ResponseWriter, r *dns.Msg, tcp bool) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{a(r.Question[0].Name, 60, "192.0.2.1")}
		w.WriteMsg(m)
	})
	// A closed port: the exchange fails at once (ICMP port unreachable).
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	f := New(Options{Upstreams: []string{dead, good.addr}, Timeout: time.Second})
	for i := range 2 { // both orders of the round robin
		req := new(dns.Msg)
		req.SetQuestion("x.example.", dns.TypeA)
		resp, err := f.Forward(context.Background(), req)
		if err != nil || len(resp.Answer) != 1 {
			t.Errorf("try %d: got %v, %v; want the good upstream's answer", i, resp, err)
		}
	}
}

func TestNoUpstream(t *testing.T) {
	f := New(Options{})
	req := new(dns.Msg)
	req.SetQuestion("x.example.", dns.TypeA)
	if _, err := f.Forward(context.Background(), req); err != ErrNoUpstream {
		t.Errorf("got %v, want ErrNoUpstream", err)
	}
}

func TestIsLocal(t *testing.T) {
	for _, tc := range []struct {
		upstream string
		self     []string
		want     bool
	}{
		{"127.0.0.1:53", []string{"127.0.0.1"}, true},
		{"127.0.0.1:5353", []string{"127.0.0.1"}, false},
		{"127.0.0.53:53", []string{"127.0.0.1"}, false},
		{"127.0.0.53:53", []string{"0.0.0.0"}, true},
		{"[::1]:53", []string{"::1"}, true},
		{"192.0.2.1:53", []string{"0.0.0.0"}, false},
	} {
		if got := IsLocal(tc.upstream, tc.self, 53, nil); got != tc.want {
			t.Errorf("IsLocal(%s, %v): got %v, want %v", tc.upstream, tc.self, got, tc.want)
		}
	}
}
