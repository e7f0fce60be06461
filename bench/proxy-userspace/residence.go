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

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// flow is one direction of one TCP connection, seen from the capture.
type flow struct {
	isn  uint32
	segs []seg // data segments in capture order
}

// seg is a data segment: the stream offset just past its last byte and
// when it was written.
type seg struct {
	end uint64
	at  time.Duration
}

type flowKey struct {
	src, dst [6]byte // IPv4 address and port
}

// capture is what residence reads from a pcap file.
type capture struct {
	flows map[flowKey]*flow
	// front and back connections in the order their SYNs were sent: the
	// proxy accepts and connects in that order, which pairs them.
	frontSyns, backSyns []flowKey
}

func residence(path string, front, back uint16, name string) error {
	c, err := readCapture(path, front, back)
	if err != nil {
		return err
	}
	if len(c.frontSyns) != len(c.backSyns) {
		return fmt.Errorf("%d client connections but %d backend connections: cannot pair them", len(c.frontSyns), len(c.backSyns))
	}
	var total, reqs, resps []time.Duration
	unequal := 0
	for i, fk := range c.frontSyns {
		bk := c.backSyns[i]
		clientIn, backendOut := c.flows[fk], c.flows[bk]
		backendIn, clientOut := c.flows[reverse(bk)], c.flows[reverse(fk)]
		if clientIn == nil || backendOut == nil || backendIn == nil || clientOut == nil {
			continue
		}
		req := inProxy(clientIn, backendOut)
		resp := inProxy(backendIn, clientOut)
		reqs = append(reqs, req...)
		resps = append(resps, resp...)
		// Requests and responses are all alike (GET of one file), so
		// request k's response ends at k * (response bytes / requests).
		n := len(backendOut.segs)
		if n == 0 || len(clientOut.segs) == 0 {
			continue
		}
		respBytes := clientOut.segs[len(clientOut.segs)-1].end
		if respBytes%uint64(n) != 0 {
			unequal++
			continue
		}
		size := respBytes / uint64(n)
		byEnd := map[uint64]time.Duration{}
		for j, s := range clientOut.segs {
			byEnd[s.end] = resp[j]
		}
		for k := range n {
			r, ok := byEnd[uint64(k+1)*size]
			if !ok {
				unequal++
				break
			}
			total = append(total, req[k]+r)
		}
	}
	if len(total) == 0 {
		return fmt.Errorf("no request was seen through the proxy (%d connections with uneven responses)", unequal)
	}
	pct := func(xs []time.Duration) func(float64) string {
		slices.Sort(xs)
		return func(p float64) string {
			return fmt.Sprintf("%.0f", float64(xs[min(len(xs)-1, int(p*float64(len(xs))))].Nanoseconds())/1e3)
		}
	}
	t, q, r := pct(total), pct(reqs), pct(resps)
	fmt.Printf("RESULT residence %s connections=%d requests=%d p50_us=%s p90_us=%s p99_us=%s p999_us=%s max_us=%s request_p99_us=%s response_p99_us=%s uneven=%d\n",
		name, len(c.frontSyns), len(total), t(0.5), t(0.9), t(0.99), t(0.999), t(1), q(0.99), r(0.99), unequal)
	return nil
}

// inProxy returns, for every segment of out, how long its last byte was
// in the proxy: from the arrival of the in segment holding that byte.
func inProxy(in, out *flow) []time.Duration {
	var ds []time.Duration
	i := 0
	for _, s := range out.segs {
		for i < len(in.segs) && in.segs[i].end < s.end {
			i++
		}
		if i == len(in.segs) {
			break
		}
		ds = append(ds, s.at-in.segs[i].at)
	}
	return ds
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
				c.frontSyns = append(c.frontSyns, k)
			case back:
				c.backSyns = append(c.backSyns, k)
			}
		}
		return
	}
	fl := c.flows[k]
	if fl == nil || payload <= 0 || (sport != front && sport != back && dport != front && dport != back) {
		return
	}
	end := uint64(seq-fl.isn-1) + uint64(payload)
	if n := len(fl.segs); n > 0 && end <= fl.segs[n-1].end {
		return // a retransmission
	}
	fl.segs = append(fl.segs, seg{end: end, at: at})
}
