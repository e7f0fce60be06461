package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// pcapWriter builds a nanosecond pcap of IPv4 TCP segments on Ethernet
// framing, as tcpdump writes on lo.
type pcapWriter struct {
	b   []byte
	seq map[string]uint32 // next sequence number per direction
}

func newPcap() *pcapWriter {
	w := &pcapWriter{seq: map[string]uint32{}}
	w.b = binary.LittleEndian.AppendUint32(w.b, 0xa1b23c4d)
	w.b = binary.LittleEndian.AppendUint16(w.b, 2)
	w.b = binary.LittleEndian.AppendUint16(w.b, 4)
	w.b = append(w.b, make([]byte, 8)...)
	w.b = binary.LittleEndian.AppendUint32(w.b, 65535)
	w.b = binary.LittleEndian.AppendUint32(w.b, 1) // Ethernet
	return w
}

// seg writes a segment from sport to dport at time at (microseconds);
// syn opens the direction (with the ACK flag if ack).
func (w *pcapWriter) seg(at int, sport, dport uint16, syn, ack bool, payload string) {
	dir := fmt.Sprint(sport, ">", dport)
	if syn {
		w.seq[dir] = 1000 * uint32(sport)
	}
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], w.seq[dir])
	tcp[12] = 5 << 4
	if syn {
		tcp[13] = 0x02
		w.seq[dir]++
	}
	if ack {
		tcp[13] |= 0x10
	}
	w.seq[dir] += uint32(len(payload))
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+len(payload)))
	frame := append(append(append(make([]byte, 12), 0x08, 0x00), ip...), tcp...)
	frame = append(frame, payload...)
	t := time.Duration(at) * time.Microsecond
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(t/time.Second))
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(t%time.Second))
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(frame)))
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(frame)))
	w.b = append(w.b, frame...)
}

// A proxy on port 80 in front of a backend on 8080. Client connection
// from port 5001 is served through backend connection 6002 and client
// 5002 through 6001: the proxy connected in the other order, and only the
// requests' content pairs them. Each request spends 10+c us in the proxy
// on its way in and 20+c us on its way back, c being the connection
// number; the response comes in two segments.
func TestResidenceFromACapture(t *testing.T) {
	w := newPcap()
	const front, back = 80, 8080
	w.seg(0, 5001, front, true, false, "")
	w.seg(1, 5002, front, true, false, "")
	w.seg(2, 6001, back, true, false, "") // for 5002
	w.seg(3, 6002, back, true, false, "") // for 5001
	for _, p := range [][2]uint16{{5001, front}, {5002, front}, {6001, back}, {6002, back}} {
		w.seg(4, p[1], p[0], true, true, "")
	}
	backendOf := map[uint16]uint16{5001: 6002, 5002: 6001}
	for k := range 3 {
		for c, client := range []uint16{5001, 5002} {
			t0 := 100 + 1000*k + 300*c
			req := fmt.Sprintf("GET /1k.bin?c=%d HTTP/1.1\r\n\r\n", c)
			w.seg(t0, client, front, false, true, req)
			w.seg(t0+10+c, backendOf[client], back, false, true, req)
			w.seg(t0+50, back, backendOf[client], false, true, "HTTP/1.1 200 OK\r\n\r\n")
			w.seg(t0+60, back, backendOf[client], false, true, strings.Repeat("a", 1024))
			w.seg(t0+65, front, client, false, true, "HTTP/1.1 200 OK\r\n\r\n")
			w.seg(t0+60+20+c, front, client, false, true, strings.Repeat("a", 1024))
		}
	}
	path := filepath.Join(t.TempDir(), "c.pcap")
	if err := os.WriteFile(path, w.b, 0o644); err != nil {
		t.Fatal(err)
	}
	pairs, total, reqs, resps, err := analyse(path, front, back)
	if err != nil {
		t.Fatal(err)
	}
	if pairs != 2 {
		t.Errorf("pairs %d, want 2", pairs)
	}
	us := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Microsecond)
		}
		return ds
	}
	// Two requests per connection: the last one has no next request to
	// end its response.
	for _, c := range []struct {
		name      string
		got, want []time.Duration
	}{
		{"total", total, us(30, 30, 32, 32)},
		{"request", reqs, us(10, 10, 11, 11)},
		{"response", resps, us(20, 20, 21, 21)},
	} {
		slices.Sort(c.got)
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s times in the proxy %v, want %v", c.name, c.got, c.want)
		}
	}
}

// Requests that do not tell connections apart cannot be paired.
func TestResidenceNeedsTaggedRequests(t *testing.T) {
	w := newPcap()
	w.seg(0, 6001, 8080, true, false, "")
	w.seg(1, 6002, 8080, true, false, "")
	w.seg(2, 6001, 8080, false, true, "GET / HTTP/1.1\r\n\r\n")
	w.seg(3, 6002, 8080, false, true, "GET / HTTP/1.1\r\n\r\n")
	path := filepath.Join(t.TempDir(), "c.pcap")
	if err := os.WriteFile(path, w.b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := analyse(path, 80, 8080); err == nil || !strings.Contains(err.Error(), "must differ") {
		t.Errorf("err %v, want two backend connections that began alike", err)
	}
}
