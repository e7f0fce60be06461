package ingress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"portal.dev/portal/ingress/route"
)

// BenchmarkKeepAlive sends GETs of a 1 KiB body through the proxy to a
// local endpoint over keep-alive connections on both sides, as
// bench/ingress's keep-alive load does; client and endpoint share the
// process, so the figures are for comparing changes of the proxy, not
// for comparing proxies.
func BenchmarkKeepAlive(b *testing.B) {
	payload := strings.Repeat("x", 1024)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, payload)
	}))
	b.Cleanup(backend.Close)
	o := DefaultOptions()
	o.AccessLog = false
	tb := newTestBed(b, o)
	tb.backend("foo.com", route.Match{}, addr(backend))
	client := &http.Client{Transport: &http.Transport{}}
	req, _ := http.NewRequest("GET", "http://"+tb.http+"/1k.bin", nil)
	req.Host = "foo.com"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := io.Copy(io.Discard, resp.Body); n != int64(len(payload)) || resp.StatusCode != 200 {
			b.Fatalf("got %d with %d bytes, want 200 with %d", resp.StatusCode, n, len(payload))
		}
		resp.Body.Close()
	}
}

// BenchmarkProxyCPU sends GETs of a 1 KiB body over 16 keep-alive
// connections from a client and to an endpoint that are bare loops over
// TCP writing fixed bytes, straight to the endpoint (direct, the anchor)
// and through the proxy, and reports the process's CPU time per request
// (cpu-us/op, from getrusage): the proxy's own is the difference. CPU
// time is steadier than wall time on a busy machine; compare builds in
// one run, alternating.
func BenchmarkProxyCPU(b *testing.B) {
	const size = 1024
	backend := fixedBackend(b, size)
	b.Run("direct", func(b *testing.B) { clientLoad(b, backend, size, false) })
	b.Run("proxy", func(b *testing.B) { clientLoad(b, proxyTo(b, backend), size, false) })
	// A new client connection per request, as bench/ingress's close load.
	b.Run("direct-close", func(b *testing.B) { clientLoad(b, backend, size, true) })
	b.Run("proxy-close", func(b *testing.B) { clientLoad(b, proxyTo(b, backend), size, true) })
}

// BenchmarkLargeBodyCPU is BenchmarkProxyCPU for larger bodies, 1 MiB as
// bench/ingress's MB/s load and smaller ones around where the proxy
// starts splicing them: the proxy's CPU per response is proxy's
// cpu-us/op less direct's.
func BenchmarkLargeBodyCPU(b *testing.B) {
	for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		backend := fixedBackend(b, size)
		name := strconv.Itoa(size>>10) + "k"
		b.Run("direct-"+name, func(b *testing.B) { clientLoad(b, backend, size, false) })
		b.Run("proxy-"+name, func(b *testing.B) { clientLoad(b, proxyTo(b, backend), size, false) })
	}
}

// fixedBackend is the address of an endpoint that is a bare loop over TCP
// answering every request head with the same response, a body of size
// bytes.
func fixedBackend(b *testing.B, size int) string {
	answer := "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
		strconv.Itoa(size) + "\r\nDate: Fri, 27 Nov 2026 10:00:00 GMT\r\n\r\n" + strings.Repeat("x", size)
	return rawLoop(b, func(c net.Conn) {
		br := bufio.NewReader(c)
		for readHead(br) == nil {
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	})
}

// proxyTo is the HTTP address of a proxy, without an access log, whose one
// rule sends foo.com to backend.
func proxyTo(b *testing.B, backend string) string {
	o := DefaultOptions()
	o.AccessLog = false
	tb := newTestBed(b, o)
	tb.backend("foo.com", route.Match{}, backend)
	return tb.http
}

// clientLoad sends b.N GETs to addr from 16 clients, each answered with
// a body of size bytes, and reports cpu-us/op. Each client keeps one
// connection, or with close makes a new one for each request.
func clientLoad(b *testing.B, addr string, size int, close bool) {
	const conns = 16
	req := "GET /1k.bin HTTP/1.1\r\nHost: foo.com\r\nUser-Agent: bench\r\n\r\n"
	if close {
		req = "GET /1k.bin HTTP/1.1\r\nHost: foo.com\r\nUser-Agent: bench\r\nConnection: close\r\n\r\n"
	}
	start := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range conns {
		n := b.N / conns
		if i < b.N%conns {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			var br *bufio.Reader
			body := make([]byte, size)
			for range n {
				if c == nil {
					var err error
					if c, err = net.Dial("tcp", addr); err != nil {
						b.Error(err)
						return
					}
					br = bufio.NewReader(c)
				}
				io.WriteString(c, req)
				if err := readHead(br); err != nil {
					b.Error(err)
					return
				}
				if _, err := io.ReadFull(br, body); err != nil {
					b.Error(err)
					return
				}
				if close {
					c.Close()
					c = nil
				}
			}
			if c != nil {
				c.Close()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-us/op")
}

// rawLoop serves each connection of a new loopback listener with serve
// and returns its address.
func rawLoop(b *testing.B, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}

// readHead reads up to the empty line that ends a message head.
func readHead(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			return nil
		}
	}
}

// cpuTime is the user and system time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
