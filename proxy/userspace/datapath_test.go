package userspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// These tests run the data path on loopback only, without root: the
// Proxier has no VIPs and serves a NodePort on 127.0.0.1.

func freePort(t testing.TB) uint16 {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// tcpServer serves every connection on loopback with handle, then closes
// it.
func tcpServer(t testing.TB, handle func(c *net.TCPConn)) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c.(*net.TCPConn))
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).AddrPort()
}

// byeServer reads a connection to its end, then answers "bye:<bytes read>"
// and closes: it needs the client's half-close to answer at all.
func byeServer(t testing.TB) netip.AddrPort {
	return tcpServer(t, func(c *net.TCPConn) {
		n, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "bye:%d", n)
	})
}

// echoServer sends back what it reads and half-closes at the client's EOF.
func echoServer(t testing.TB) netip.AddrPort {
	return tcpServer(t, func(c *net.TCPConn) {
		io.Copy(c, c)
		c.CloseWrite()
	})
}

func nodePortSnapshot(nodePort uint16, eps ...netip.AddrPort) *snapshot.Snapshot {
	nn := types.NamespacedName{Namespace: "default", Name: "web"}
	var list []*snapshot.Endpoint
	for _, ap := range eps {
		list = append(list, &snapshot.Endpoint{Addr: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true, Local: true, NodeName: "n"})
	}
	return &snapshot.Snapshot{
		Services: map[types.NamespacedName]*snapshot.Service{nn: {
			Name: nn, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
			Ports: []snapshot.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: nodePort}},
		}},
		Endpoints: map[types.NamespacedName]*snapshot.ServiceEndpoints{nn: {ByPort: map[snapshot.PortKey][]*snapshot.Endpoint{
			{Name: "http", Protocol: v1.ProtocolTCP}: list}}},
		Node: &snapshot.Node{Name: "n", Eligible: true, NodePorts: snapshot.NodePortAddresses{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}},
	}
}

// dataPath is one of the TCP data paths: the event loop (Linux, with
// sockets of its own) or goroutines copying between net.Conns, which
// serve injected sockets and other systems. An injected Listen forces
// the goroutines.
type dataPath struct {
	name string
	loop bool // the event loop (on Linux)
}

var dataPaths = []dataPath{{"loop", true}, {"goroutines", false}}

// forEachPath runs test on each data path.
func forEachPath(t *testing.T, test func(t *testing.T, path dataPath)) {
	for _, path := range dataPaths {
		t.Run(path.name, func(t *testing.T) { test(t, path) })
	}
}

// start starts a Proxier whose TCP frontends use path, and checks that
// they do.
func (path dataPath) start(t testing.TB, cfg Config, s *snapshot.Snapshot) *Proxier {
	t.Helper()
	if !path.loop && cfg.Listen == nil {
		cfg.Listen = func(network, addr string) (net.Listener, error) { return net.Listen(network, addr) }
	}
	p := startProxier(t, cfg, s)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frontends {
		if f.ln == nil {
			continue
		}
		if got, want := len(f.loops) > 0, path.loop && runtime.GOOS == "linux"; got != want {
			t.Fatalf("frontend %v served by the event loop: got %v, want %v", f.key.addr, got, want)
		}
	}
	return p
}

func startProxier(t testing.TB, cfg Config, s *snapshot.Snapshot) *Proxier {
	t.Helper()
	p := New(cfg)
	t.Cleanup(func() { p.Close() })
	if err := p.Sync(context.Background(), snapshot.Request{Snapshot: s, Full: true}); err != nil {
		t.Fatal(err)
	}
	return p
}

func askBye(t testing.TB, addr string, payload string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, payload)
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(got)
}

func TestTCPHalfCloseAndRetry(t *testing.T) {
	dead := deadEndpoint(t)
	live := byeServer(t)
	np := freePort(t)
	tests := []struct {
		name string
		eps  []netip.AddrPort
	}{
		{"one live endpoint", []netip.AddrPort{live}},
		{"a dead endpoint is skipped", []netip.AddrPort{dead, live}},
	}
	forEachPath(t, func(t *testing.T, path dataPath) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				path.start(t, Config{}, nodePortSnapshot(np, tc.eps...))
				for i := range 6 { // rr: every other connection first tries the dead one
					if got := askBye(t, fmt.Sprintf("127.0.0.1:%d", np), "hello"); got != "bye:5" {
						t.Fatalf("connection %d: got %q, want bye:5", i, got)
					}
				}
			})
		}
	})
}

// TestTCPAllEndpointsDeadReset: when no endpoint takes the connection,
// the client gets a reset at once, not a clean end it could take for an
// empty answer.
func TestTCPAllEndpointsDeadReset(t *testing.T) {
	dead1, dead2 := deadEndpoint(t), deadEndpoint(t)
	np := freePort(t)
	forEachPath(t, func(t *testing.T, path dataPath) {
		path.start(t, Config{}, nodePortSnapshot(np, dead1, dead2))
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", np), 2*time.Second)
		if err == nil {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1))
		}
		// The reset may come before the dial has checked its socket.
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("read with every endpoint dead: got %v, want a connection reset", err)
		}
	})
}

// TestTCPByteCounters: the per-endpoint byte counters count what went
// each way, small messages and bulk ones.
func TestTCPByteCounters(t *testing.T) {
	ep := byeServer(t)
	np := freePort(t)
	forEachPath(t, func(t *testing.T, path dataPath) {
		reg := prometheus.NewRegistry()
		path.start(t, Config{Registerer: reg}, nodePortSnapshot(np, ep))
		var toEndpoint, toClient int
		for _, size := range []int{5, 1000, 300 << 10} {
			want := fmt.Sprintf("bye:%d", size)
			if got := askBye(t, fmt.Sprintf("127.0.0.1:%d", np), strings.Repeat("x", size)); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			toEndpoint += size
			toClient += len(want)
		}
		// A connection's bytes are counted as it closes, just after its
		// client has seen the end.
		deadline := time.Now().Add(5 * time.Second)
		for {
			gotE := counted(t, reg, "portal_userspace_bytes_total", "endpoint", ep.String(), "direction", "to_endpoint")
			gotC := counted(t, reg, "portal_userspace_bytes_total", "endpoint", ep.String(), "direction", "to_client")
			if gotE == float64(toEndpoint) && gotC == float64(toClient) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bytes counted to the endpoint and to the client: got %v and %v, want %d and %d", gotE, gotC, toEndpoint, toClient)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// counted returns the value of the counter name whose series carries
// every label="value" of labels (pairs), 0 if there is none.
func counted(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && have[labels[i]] == labels[i+1]
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestTCPEndpointRemovedDuringConnect pins a bug: a connect that
// succeeded after its endpoint had been removed closed the client's
// connection. It must go to another endpoint, as after a failed connect
// (a killed backend costs no failed client connection).
func TestTCPEndpointRemovedDuringConnect(t *testing.T) {
	a, b := byeServer(t), byeServer(t)
	np := freePort(t)
	forEachPath(t, func(t *testing.T, path dataPath) {
		var proxier atomic.Pointer[Proxier]
		var once sync.Once
		removed := make(chan string, 1)
		// remove runs once a connect to endpoint has succeeded, before
		// the connection counts as the endpoint's.
		remove := func(endpoint string) {
			once.Do(func() {
				keep := a
				if endpoint == a.String() {
					keep = b
				}
				if err := proxier.Load().Sync(context.Background(), snapshot.Request{Snapshot: nodePortSnapshot(np, keep), Full: true}); err != nil {
					t.Error(err)
				}
				removed <- endpoint
			})
		}
		var cfg Config
		if path.loop && runtime.GOOS == "linux" {
			setConnectedHook(t, remove)
		} else {
			d := &net.Dialer{}
			cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err == nil {
					remove(addr)
				}
				return c, err
			}
		}
		proxier.Store(path.start(t, cfg, nodePortSnapshot(np, a, b)))
		if got := askBye(t, fmt.Sprintf("127.0.0.1:%d", np), "hello"); got != "bye:5" {
			t.Fatalf("got %q, want bye:5 from the endpoint that stayed", got)
		}
		select {
		case <-removed:
		default:
			t.Fatal("no endpoint was removed: the test did not reach the case")
		}
	})
}

func TestNoEndpointsNoListener(t *testing.T) {
	np := freePort(t)
	startProxier(t, Config{}, nodePortSnapshot(np))
	if c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", np), time.Second); err == nil {
		c.Close()
		t.Errorf("connected to a NodePort without endpoints, want refused")
	}
}

// TestDrain: an endpoint that leaves keeps its open connection until the
// drain timeout closes it.
func TestDrain(t *testing.T) {
	forEachPath(t, func(t *testing.T, path dataPath) {
		hold, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer hold.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := hold.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		np := freePort(t)
		ep := hold.Addr().(*net.TCPAddr).AddrPort()
		p := path.start(t, Config{DrainTimeout: 200 * time.Millisecond}, nodePortSnapshot(np, ep))
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", np))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		up := <-accepted
		defer up.Close()
		// One round trip first: the proxy has then registered the connection.
		io.WriteString(up, "x")
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if err := p.Sync(context.Background(), snapshot.Request{Snapshot: nodePortSnapshot(np), Full: true}); err != nil {
			t.Fatal(err)
		}
		// Still open right after the endpoint left...
		io.WriteString(up, "x")
		buf := make([]byte, 1)
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("connection closed at once, want it to drain: %v", err)
		}
		// ...and closed by the drain timeout.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err == nil {
			t.Fatalf("read after drain: got data, want the connection closed")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection still open 5s after a 200ms drain timeout")
		}
	})
}

// BenchmarkTCPBulk measures the spliced data path: 1 MiB per op through
// the proxy on loopback.
func BenchmarkTCPBulk(b *testing.B) {
	sink := tcpServer(b, func(c *net.TCPConn) { io.Copy(io.Discard, c) })
	np := freePort(b)
	startProxier(b, Config{}, nodePortSnapshot(np, sink))
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", np))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPConnect measures a new connection through the proxy with a
// request and its answer (accept, connect, splice setup, teardown).
func BenchmarkTCPConnect(b *testing.B) {
	ep := byeServer(b)
	np := freePort(b)
	startProxier(b, Config{}, nodePortSnapshot(np, ep))
	addr := fmt.Sprintf("127.0.0.1:%d", np)
	b.ResetTimer()
	for range b.N {
		if got := askBye(b, addr, "x"); got != "bye:1" {
			b.Fatalf("got %q", got)
		}
	}
}

// TestTCPSmallAndBulk sends messages below and above the copy buffer both
// ways: small ones are copied through a buffer, a stream that fills it
// switches to splice, and every byte must arrive in order either way.
func TestTCPSmallAndBulk(t *testing.T) {
	forEachPath(t, testTCPSmallAndBulk)
}

func testTCPSmallAndBulk(t *testing.T, path dataPath) {
	np := freePort(t)
	path.start(t, Config{}, nodePortSnapshot(np, echoServer(t)))
	for _, size := range []int{1, 1024, copyBufSize - 1, copyBufSize, 4 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", np), 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(i * 7 / 3)
			}
			go func() {
				c.Write(want)
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got %d bytes back, want the %d sent", len(got), len(want))
			}
		})
	}
}

// TestTCPConcurrentEcho runs many connections at once, each sending a
// stream of its own in writes of varied sizes while reading the echo
// (half of them late), so the copies block on full sockets both ways
// (pending bytes, bulk switch mid-stream) and the connections spread over
// the event loops.
func TestTCPConcurrentEcho(t *testing.T) {
	forEachPath(t, testTCPConcurrentEcho)
}

func testTCPConcurrentEcho(t *testing.T, path dataPath) {
	np := freePort(t)
	path.start(t, Config{}, nodePortSnapshot(np, echoServer(t)))
	const conns = 16
	errs := make(chan error, conns)
	for k := range conns {
		go func() {
			size := (k%6 + 1) * 200_000
			if k%2 == 1 {
				size = 4 << 20 // more than the proxy's socket buffers hold
			}
			errs <- echoStream(fmt.Sprintf("127.0.0.1:%d", np), k, size)
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// echoStream sends size bytes (a pattern of its own, in writes of 1 B to
// 64 KiB) through addr to an echo server and checks what comes back.
func echoStream(addr string, k, size int) error {
	c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*31 + k)
	}
	go func() {
		for off, n := 0, 1; off < size; n = n*7%65536 + 1 {
			end := min(off+n, size)
			if _, err := c.Write(want[off:end]); err != nil {
				return
			}
			off = end
		}
		c.(*net.TCPConn).CloseWrite()
	}()
	if k%2 == 1 {
		// A late reader with a small buffer: the sockets fill up on the
		// way back, and the proxy must hold what it read until they
		// drain.
		c.(*net.TCPConn).SetReadBuffer(32 << 10)
		time.Sleep(100 * time.Millisecond)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("connection %d: read: %w", k, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("connection %d: got %d bytes back (equal: false), want the %d sent", k, len(got), len(want))
	}
	return nil
}

// TestTCPSlowReaderSmallMessages: an endpoint sends small messages to a
// client that does not read for a while, so the proxy's writes to the
// client block while reads of every size (small ones, then full ones that
// switch the stream to splice) keep coming; every byte must arrive in
// order.
func TestTCPSlowReaderSmallMessages(t *testing.T) {
	forEachPath(t, testTCPSlowReaderSmallMessages)
}

func testTCPSlowReaderSmallMessages(t *testing.T, path dataPath) {
	const msgs, size = 3000, 1000
	want := make([]byte, msgs*size)
	for i := range want {
		want[i] = byte(i * 13 / 7)
	}
	ep := tcpServer(t, func(c *net.TCPConn) {
		for i := range msgs {
			if _, err := c.Write(want[i*size : (i+1)*size]); err != nil {
				return
			}
		}
	})
	np := freePort(t)
	path.start(t, Config{}, nodePortSnapshot(np, ep))
	c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", np), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(32 << 10)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	time.Sleep(100 * time.Millisecond)
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got %d bytes (equal: false), want the %d sent", len(got), len(want))
	}
}
