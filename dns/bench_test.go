package dns

import (
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkHandle measures the UDP packet handler on its hot path (a query
// answered from the packed-response cache) and on a miss. The hot path must
// not allocate.
func BenchmarkHandle(b *testing.B) {
	s, err := New(nil, Options{Upstream: []string{"none"}})
	if err != nil {
		b.Fatal(err)
	}
	fillCluster(s.idx)
	if err := s.setupForwarder(); err != nil {
		b.Fatal(err)
	}
	s.markReady()
	m := new(dns.Msg)
	m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	pkt, _ := m.Pack()
	out := make([]byte, 4096)

	b.Run("cached", func(b *testing.B) {
		w := newWorker(s)
		w.handle(pkt, out, famIPv4)
		b.ReportAllocs()
		for b.Loop() {
			if resp, _ := w.handle(pkt, out, famIPv4); resp == nil {
				b.Fatal("no response")
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		w := newWorker(s)
		b.ReportAllocs()
		for b.Loop() {
			clear(w.cache)
			if resp, _ := w.handle(pkt, out, famIPv4); resp == nil {
				b.Fatal("no response")
			}
		}
	})
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	s, err := New(nil, Options{Upstream: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	fillCluster(s.idx)
	if err := s.setupForwarder(); err != nil {
		t.Fatal(err)
	}
	s.markReady()
	m := new(dns.Msg)
	m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	pkt, _ := m.Pack()
	out := make([]byte, 4096)
	w := newWorker(s)
	w.handle(pkt, out, famIPv4)
	if n := testing.AllocsPerRun(100, func() { w.handle(pkt, out, famIPv4) }); n != 0 {
		t.Errorf("allocations per cached answer: got %v, want 0", n)
	}
}
