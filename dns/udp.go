package dns

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"portal.dev/portal/dns/wire"
)

// fastCacheMax bounds a worker's packed-response cache; when full it is
// emptied, which costs one rebuild per name and keeps memory flat.
const fastCacheMax = 20000

// worker serves one UDP socket. Its cache of packed responses is its own,
// so the hot path takes no lock: parse the question by hand, look the key
// up, copy, patch ID, flags and the question's case, send.
type worker struct {
	s     *Server
	gen   uint64
	cache map[string]cached
	key   []byte
	q     wire.Query
}

type cached struct {
	resp  []byte
	rcode uint8
	// plugin says who answered, for the responses metric.
	plugin uint8
}

func newWorker(s *Server) *worker {
	return &worker{s: s, cache: make(map[string]cached), key: make([]byte, 0, wire.KeyLen)}
}

// handle answers one packet into out (at least 64 KiB) and returns the
// response, or nil to send nothing. When the question belongs upstream it
// returns the parsed request instead, for the caller to forward without
// holding up the socket.
func (w *worker) handle(pkt, out []byte, fam int) (resp []byte, fwd *dns.Msg) {
	start := time.Now()
	key, plain := wire.Parse(pkt, &w.q, w.key[:0])
	if plain {
		if g := w.s.idx.Generation(); g != w.gen {
			clear(w.cache)
			w.gen = g
		}
		if c, ok := w.cache[string(key)]; ok && len(c.resp) <= cap(out) {
			out = out[:len(c.resp)]
			copy(out, c.resp)
			wire.Patch(out, pkt, &w.q)
			w.s.metrics.observe(protoUDP, fam, w.q.QType, int(c.rcode), int(c.plugin), time.Since(start))
			return out, nil
		}
	}
	req := new(dns.Msg)
	if err := req.Unpack(pkt); err != nil {
		resp = wire.FormErr(pkt, out)
		if resp != nil {
			w.s.metrics.observe(protoUDP, fam, 0, dns.RcodeFormatError, pluginNone, time.Since(start))
		}
		return resp, nil
	}
	o, ok := w.s.local(req)
	if !ok {
		if m := w.s.fwd.Cached(req); m != nil {
			o = outcome{resp: m, plugin: pluginCache}
		} else {
			return nil, req
		}
	}
	if o.resp == nil {
		return nil, nil
	}
	finalize(o.resp, req, true)
	packed, err := o.resp.PackBuffer(out)
	if err != nil {
		return wire.FormErr(pkt, out), nil
	}
	if plain && o.cacheable && len(w.cache) < fastCacheMax && wire.SameQuestionName(packed, pkt, &w.q) &&
		w.s.idx.Generation() == w.gen {
		w.cache[string(key)] = cached{resp: append([]byte(nil), packed...), rcode: uint8(o.resp.Rcode), plugin: uint8(o.plugin)}
	} else if len(w.cache) >= fastCacheMax {
		clear(w.cache)
	}
	w.s.observe(protoUDP, fam, req, o, time.Since(start))
	return packed, nil
}

// forwardAsync forwards req upstream in its own goroutine and writes the
// answer to the client; at most cap(fwdSem) run at once, beyond that the
// query is dropped (the client retries).
func (s *Server) forwardAsync(ctx context.Context, wg *sync.WaitGroup, c *net.UDPConn, req *dns.Msg, to netip.AddrPort, fam int) {
	select {
	case s.fwdSem <- struct{}{}:
	default:
		return
	}
	start := time.Now()
	wg.Go(func() {
		defer func() { <-s.fwdSem }()
		o := s.forward(ctx, req)
		finalize(o.resp, req, true)
		b, err := o.resp.Pack()
		if err != nil {
			return
		}
		c.WriteToUDPAddrPort(b, to)
		s.observe(protoUDP, fam, req, o, time.Since(start))
	})
}
