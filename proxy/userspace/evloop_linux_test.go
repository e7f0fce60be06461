package userspace

import (
	"bytes"
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

// TestPumpKeepsWhatItCannotWrite drives one direction of a connection by
// hand: small messages come in while the destination is full, so a write
// goes through only in part and the rest must wait in the connection's
// pending buffer, to be written, in order, once the destination drains.
func TestPumpKeepsWhatItCannotWrite(t *testing.T) {
	p := New(Config{})
	defer p.Close()
	l, err := newEvLoop(p) // not run: the test is its goroutine
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	pair := func() [2]int {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		unix.SetNonblock(fds[0], true)
		unix.SetNonblock(fds[1], true)
		return fds
	}
	client, endpoint := pair(), pair() // [0]: the loop's side, [1]: the peer's
	unix.SetsockoptInt(endpoint[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
	c := &evConn{l: l, fd: [2]int{client[0], endpoint[0]}, state: connOpen, wr: [2]bool{true, true}}

	const msgs, size = 200, 1000
	var sent, got []byte
	drain := func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(endpoint[1], buf)
			if n <= 0 || err != nil {
				return
			}
			got = append(got, buf[:n]...)
		}
	}
	pended := false
	for i := range msgs {
		msg := make([]byte, size)
		for j := range msg {
			msg[j] = byte(i + j)
		}
		if _, err := unix.Write(client[1], msg); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, msg...)
		c.rd[0] = true // the event of the new message
		l.pump(c, 0)
		if c.dir[0].bulk {
			t.Fatal("a 1000-byte message switched the stream to bulk")
		}
		if c.dir[0].pend != nil {
			pended = true
			drain() // the endpoint reads; its socket is writable again
			c.wr[1] = true
			l.pump(c, 0)
		}
	}
	drain()
	if !pended {
		t.Fatal("no write was cut short: the test did not reach the pending buffer")
	}
	if c.dir[0].pend != nil || !bytes.Equal(got, sent) {
		t.Errorf("endpoint got %d bytes (equal: %v), want the %d sent, none pending", len(got), bytes.Equal(got, sent), len(sent))
	}
}
