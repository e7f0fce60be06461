package userspace

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// hangingEndpoint returns a loopback address whose connects neither
// succeed nor fail: a listener with a full accept queue drops SYNs.
func hangingEndpoint(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*syscall.SockaddrInet4).Port))
	filler, err := net.DialTimeout("tcp4", ap.String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	if c, err := net.DialTimeout("tcp4", ap.String(), 100*time.Millisecond); err == nil {
		c.Close()
		t.Skip("this kernel takes a connection past a full accept queue")
	}
	return ap
}

// TestTCPConnectTimeoutRetries: an endpoint that never answers a connect
// costs the client DialTimeout, then the next endpoint serves it. The
// event loop keeps one deadline for all its connects.
func TestTCPConnectTimeoutRetries(t *testing.T) {
	hang := hangingEndpoint(t)
	live := byeServer(t)
	np := freePort(t)
	reg := prometheus.NewRegistry()
	p := startProxier(t, Config{DialTimeout: 150 * time.Millisecond, Registerer: reg}, nodePortSnapshot(np, hang, live))
	if len(p.tcpLoops()) == 0 {
		t.Fatal("no event loop: the test would not exercise the Linux data path")
	}
	for i := range 4 {
		if got := askBye(t, fmt.Sprintf("127.0.0.1:%d", np), "hello"); got != "bye:5" {
			t.Fatalf("connection %d: got %q, want bye:5", i, got)
		}
	}
	// rr moves on with each pick, the retry's too, so each connection
	// may try the hanging endpoint first.
	if got := failures(t, reg, hang.String()); got < 1 || got > 4 {
		t.Errorf("connect failures of the hanging endpoint: got %v, want 1 to 4", got)
	}
}

func failures(t *testing.T, reg *prometheus.Registry, endpoint string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "portal_userspace_connect_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "endpoint" && l.GetValue() == endpoint {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestTCPNoDelay: both sockets of a proxied connection have Nagle off, or
// the second write of an answer waits for the peer's delayed ACK. The
// client's socket gets it from the listener.
func TestTCPNoDelay(t *testing.T) {
	up, accepted := holdServer(t)
	np := freePort(t)
	p := startProxier(t, Config{}, nodePortSnapshot(np, up))
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", np))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-accepted
	// Each loop reports the options of the connections it serves.
	loops := p.tcpLoops()
	found := make(chan [][2]int, len(loops))
	for _, l := range loops {
		l.post(func() {
			var got [][2]int
			for conn := range l.conns {
				var opts [2]int
				for i, fd := range conn.fd {
					opts[i], _ = unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
				}
				got = append(got, opts)
			}
			found <- got
		})
	}
	var got [][2]int
	for range loops {
		select {
		case g := <-found:
			got = append(got, g...)
		case <-time.After(5 * time.Second):
			t.Fatal("an event loop did not run the check")
		}
	}
	if len(got) != 1 || got[0] != [2]int{1, 1} {
		t.Errorf("TCP_NODELAY of the client and endpoint sockets: got %v, want [[1 1]]", got)
	}
}
