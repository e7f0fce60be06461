package main

// Residence: the latency a proxy adds, read off a packet capture rather
// than subtracted from end-to-end figures. On this two-core layout the
// client and nginx share a core and their queueing swings the end-to-end
// p99 by milliseconds between runs, far more than a proxy adds; and with
// a proxy on the other core that queueing even shrinks, so "direct" is no
// baseline. The capture is taken on lo, where the kernel stamps a segment
// when its sender writes it. For every byte the proxy forwards, the time
// from its arrival (the client's or the backend's write) to its departure
// (the proxy's write) is the time it spent in the proxy. A request's added
// latency is that time for the last byte of the request plus that for the
// last byte of its response.
//
// What it relies on, from this client: one request per write, and one
// request at a time per connection (so request k's response is what the
// proxy sent back before request k+1 came), and each connection's
// requests tagged apart, so that a client connection and the backend
// connection the proxy opened for it are paired by their first request.
// Offsets are 32-bit: up to 4 GiB per direction and connection.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"
)

// flow is one direction of one TCP connection, seen from the capture.
type flow struct {
	isn   uint32
	segs  []seg  // data segments in capture order
	first []byte // the start of the first segment's payload
}

// seg is a data segment: the stream offsets of its first byte and just
// past its last, and when it was written.
type seg struct {
	off, end uint64
	at       time.Duration
}

func (s seg) size() uint64 { return s.end - s.off }

type flowKey struct {
	src, dst [6]byte // IPv4 address and port
}

// capture is what residence reads from a pcap file.
type capture struct {
	flows map[flowKey]*flow
	// The client->proxy and proxy->backend directions of the
	// connections whose SYN was captured.
	fronts, backs []flowKey
}

func residence(path string, front, back uint16, name string) error {
	pairs, total, reqs, resps, err := analyse(path, front, back)
	if err != nil {
		return err
	}
	pct := func(xs []time.Duration) func(float64) string {
		slices.Sort(xs)
		return func(p float64) string {
			return fmt.Sprintf("%.0f", float64(xs[min(len(xs)-1, int(p*float64(len(xs))))].Nanoseconds())/1e3)
		}
	}
	t, q, r := pct(total), pct(reqs), pct(resps)
	fmt.Printf("RESULT residence %s connections=%d requests=%d p50_us=%s p90_us=%s p99_us=%s p999_us=%s max_us=%s request_p99_us=%s response_p99_us=%s\n",
		name, pairs, len(total), t(0.5), t(0.9), t(0.99), t(0.999), t(1), q(0.99), r(0.99))
	return nil
}

// analyse reads a capture and returns how many connection pairs it found
// and, for every request, its time in the proxy: in all, for the request
// and for the response.
func analyse(path string, front, back uint16) (pairs int, total, reqs, resps []time.Duration, err error) {
	c, err := readCapture(path, front, back)
	if err != nil {
		return 0, nil, nil, nil, err
	}
	ps, err := c.pair()
	if err != nil {
		return 0, nil, nil, nil, err
	}
	for _, p := range ps {
		req, resp, err := c.exchanges(p[0], p[1])
		if err != nil {
			return 0, nil, nil, nil, err
		}
		reqs = append(reqs, req...)
		resps = append(resps, resp...)
		for k := range req {
			total = append(total, req[k]+resp[k])
		}
	}
	if len(total) == 0 {
		return 0, nil, nil, nil, fmt.Errorf("no request was seen through the proxy (%d client connections)", len(c.fronts))
	}
	return len(ps), total, reqs, resps, nil
}

// pair returns each client connection (its client->proxy key) with the
// backend connection the proxy opened for it (its proxy->backend key):
// the one whose first request is the same.
func (c *capture) pair() ([][2]flowKey, error) {
	byFirst := map[string]flowKey{}
	for _, k := range c.backs {
		if f := c.flows[k]; len(f.first) > 0 {
			if _, dup := byFirst[string(f.first)]; dup {
				return nil, fmt.Errorf("two backend connections began with %q: requests must differ between connections", f.first)
			}
			byFirst[string(f.first)] = k
		}
	}
	var pairs [][2]flowKey
	for _, k := range c.fronts {
		f := c.flows[k]
		if len(f.first) == 0 {
			continue // no request, or its start was not captured
		}
		if b, ok := byFirst[string(f.first)]; ok {
			pairs = append(pairs, [2]flowKey{k, b})
		}
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no client connection (of %d) matched a backend connection (of %d) by its first request", len(c.fronts), len(c.backs))
	}
	return pairs, nil
}

// exchanges returns, for each request of a pair of connections, the time
// its last byte and the last byte of its response spent in the proxy.
// The last request of the connection, whose response has no next request
// to end it, and requests the capture did not see through are left out.
func (c *capture) exchanges(frontKey, backKey flowKey) (req, resp []time.Duration, err error) {
	clientIn, backendOut := c.flows[frontKey], c.flows[backKey]
	backendIn, clientOut := c.flows[reverse(backKey)], c.flows[reverse(frontKey)]
	if backendIn == nil || clientOut == nil {
		return nil, nil, nil
	}
	in := clientIn.segs
	var prevEnd uint64 // of the previous response
	for k := 0; k+1 < len(in); k++ {
		if in[k].size() != in[0].size() {
			return nil, nil, fmt.Errorf("client segments of %d and %d bytes: the client must write one request at a time", in[0].size(), in[k].size())
		}
		sent, ok := backendOut.sentBy(in[k].end)
		if !ok {
			break
		}
		// The response: what the proxy sent the client before the next
		// request came.
		j := sort.Search(len(clientOut.segs), func(i int) bool { return clientOut.segs[i].at >= in[k+1].at }) - 1
		if j < 0 || clientOut.segs[j].end <= prevEnd {
			return nil, nil, fmt.Errorf("request %d of a connection has no response before the next request: not one request at a time, or the capture lost segments", k)
		}
		prevEnd = clientOut.segs[j].end
		came, ok := backendIn.sentBy(clientOut.segs[j].end)
		if !ok {
			break
		}
		dq, dr := sent-in[k].at, clientOut.segs[j].at-came
		if dq < 0 || dr < 0 {
			return nil, nil, fmt.Errorf("a byte left the proxy before it came (%v, %v): the connections are paired wrongly", dq, dr)
		}
		req, resp = append(req, dq), append(resp, dr)
	}
	return req, resp, nil
}

// sentBy returns when the byte just before stream offset end was written.
func (f *flow) sentBy(end uint64) (time.Duration, bool) {
	i := sort.Search(len(f.segs), func(i int) bool { return f.segs[i].end >= end })
	if i == len(f.segs) {
		return 0, false
	}
	return f.segs[i].at, true
}

func reverse(k flowKey) flowKey { return flowKey{src: k.dst, dst: k.src} }

// readCapture reads a pcap file (microsecond or nanosecond stamps;
// Ethernet, Linux cooked v1 or v2 framing) of IPv4 TCP segments to or
// from the ports front (the proxy's) and back (the backend's).
func readCapture(path string, front, back uint16) (*capture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var gh [24]byte
	if _, err := io.ReadFull(r, gh[:]); err != nil {
		return nil, fmt.Errorf("pcap header: %w", err)
	}
	var nano bool
	switch binary.LittleEndian.Uint32(gh[0:]) {
	case 0xa1b2c3d4:
	case 0xa1b23c4d:
		nano = true
	default:
		return nil, errors.New("not a little-endian pcap file")
	}
	var l2 int
	switch lt := binary.LittleEndian.Uint32(gh[20:]); lt {
	case 1:
		l2 = 14
	case 113:
		l2 = 16
	case 276:
		l2 = 20
	default:
		return nil, fmt.Errorf("link type %d", lt)
	}
	c := &capture{flows: map[flowKey]*flow{}}
	var first time.Duration
	var ph [16]byte
	buf := make([]byte, 1<<16)
	for {
		if _, err := io.ReadFull(r, ph[:]); err == io.EOF {
			return c, nil
		} else if err != nil {
			return nil, err
		}
		sub := time.Duration(binary.LittleEndian.Uint32(ph[4:]))
		if !nano {
			sub *= time.Microsecond
		}
		at := time.Duration(binary.LittleEndian.Uint32(ph[0:]))*time.Second + sub
		if first == 0 {
			first = at
		}
		incl := int(binary.LittleEndian.Uint32(ph[8:]))
		if incl > len(buf) {
			return nil, fmt.Errorf("record of %d bytes", incl)
		}
		p := buf[:incl]
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, err
		}
		c.add(p, l2, at-first, front, back)
	}
}

func (c *capture) add(p []byte, l2 int, at time.Duration, front, back uint16) {
	if len(p) < l2+20 {
		return
	}
	ip := p[l2:]
	if ip[0]>>4 != 4 || ip[9] != 6 {
		return
	}
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if len(ip) < ihl+20 || total < ihl+20 {
		return
	}
	tcp := ip[ihl:]
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || doff > len(tcp) {
		return
	}
	payload := total - ihl - doff
	var k flowKey
	copy(k.src[:4], ip[12:16])
	copy(k.src[4:], tcp[0:2])
	copy(k.dst[:4], ip[16:20])
	copy(k.dst[4:], tcp[2:4])
	sport, dport := binary.BigEndian.Uint16(tcp[0:]), binary.BigEndian.Uint16(tcp[2:])
	seq := binary.BigEndian.Uint32(tcp[4:])
	flags := tcp[13]
	const syn, ack = 0x02, 0x10
	if flags&syn != 0 {
		if _, seen := c.flows[k]; seen {
			return // a retransmitted SYN
		}
		c.flows[k] = &flow{isn: seq}
		if flags&ack == 0 {
			switch dport {
			case front:
				c.fronts = append(c.fronts, k)
			case back:
				c.backs = append(c.backs, k)
			}
		}
		return
	}
	fl := c.flows[k]
	if fl == nil || payload <= 0 || (sport != front && sport != back && dport != front && dport != back) {
		return
	}
	off := uint64(seq - fl.isn - 1)
	end := off + uint64(payload)
	if n := len(fl.segs); n > 0 && end <= fl.segs[n-1].end {
		return // a retransmission
	}
	if off == 0 {
		data := tcp[doff:min(len(tcp), doff+payload)]
		fl.first = append([]byte(nil), data[:min(len(data), 48)]...)
	}
	fl.segs = append(fl.segs, seg{off: off, end: end, at: at})
}
