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
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// hangingEndpoint returns a loopback address whose connects neither
// succeed nor fail: a listener with a full accept queue drops SYNs.
func hangingEndpoint(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, ap := boundSocket(t)
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
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
	if got := counted(t, reg, "portal_userspace_connect_failures_total", "endpoint", hang.String()); got < 1 || got > 4 {
		t.Errorf("connect failures of the hanging endpoint: got %v, want 1 to 4", got)
	}
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
	l := idleLoop(t)
	defer l.close()
	client, endpoint := sockPair(t), sockPair(t) // [0]: the loop's side, [1]: the peer's
	unix.SetsockoptInt(endpoint[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
	c := &evConn{l: l, fd: [2]int{client[0], endpoint[0]}, state: connOpen, wr: [2]bool{true, true}}

	const msgs, size = 200, 1000
	var sent, got []byte
	drain := func() { got = append(got, readAll(endpoint[1])...) }
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

// sockPair returns a connected pair of non-blocking stream sockets.
func sockPair(t *testing.T) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	unix.SetNonblock(fds[0], true)
	unix.SetNonblock(fds[1], true)
	return fds
}

// readAll reads what a non-blocking socket holds now.
func readAll(fd int) []byte {
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			return got
		}
		got = append(got, buf[:n]...)
	}
}

// setConnectedHook runs fn on the event loop each time a connect to an
// endpoint succeeds, until the test ends (after its Proxier's Close, when
// set before the Proxier starts).
func setConnectedHook(t *testing.T, fn func(endpoint string)) {
	testHookConnected = fn
	t.Cleanup(func() { testHookConnected = nil })
}

// TestExpireArmsEarliestDeadline pins a bug: after a fast retry the
// connecting list is out of deadline order (the retried connection is
// appended again with a later deadline, its first entry stays first),
// and the loop armed its first entry's deadline, so another connect
// timed out up to twice DialTimeout late.
func TestExpireArmsEarliestDeadline(t *testing.T) {
	l := idleLoop(t)
	defer l.close()
	now := time.Now()
	retried := &evConn{state: connConnecting, deadline: now.Add(2 * time.Second)}
	waiting := &evConn{state: connConnecting, deadline: now.Add(time.Second)}
	l.connecting = []*evConn{retried, waiting, retried}
	l.expire(now)
	if !l.armed.Equal(waiting.deadline) {
		t.Errorf("armed deadline: got now+%v, want now+%v (the earliest)", l.armed.Sub(now), waiting.deadline.Sub(now))
	}
}

// handLoop returns an event loop the test drives by hand (it is not
// run) with a TCP frontend on loopback whose connections go to ep.
// idleLoop returns an event loop of a new Proxier that nothing runs: the
// test turns it by hand.
func idleLoop(t *testing.T) *evLoop {
	t.Helper()
	p := New(Config{})
	t.Cleanup(func() { p.Close() })
	l, err := newEvLoop(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func handLoop(t *testing.T, ep netip.AddrPort) (*evLoop, *net.TCPAddr) {
	t.Helper()
	l := idleLoop(t)
	p := l.p
	t.Cleanup(l.shutdown)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	sp := p.servicePort(portKey{svc: types.NamespacedName{Namespace: "default", Name: "web"}, port: "http", prot: v1.ProtocolTCP})
	bs := sp.backends([]*snapshot.Endpoint{{Addr: ep.Addr(), Port: ep.Port(), Ready: true, Serving: true}})
	f := &frontend{p: p, key: frontendKey{proto: v1.ProtocolTCP, addr: ln.Addr().(*net.TCPAddr).AddrPort()}, ln: ln, loops: []*evLoop{l}}
	f.route.Store(&route{sp: sp, backends: bs, sched: sp.scheduler(SchedulerRoundRobin, bs)})
	l.addListener(f, false)
	l.runPosted()
	return l, ln.Addr().(*net.TCPAddr)
}

// turnUntil runs turns of l until cond holds (at most 10s).
func turnUntil(t *testing.T, l *evLoop, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s of turns: not %s", what)
		}
		l.turn()
	}
}

// hasData reports whether c has bytes to read, without reading them.
func hasData(c net.Conn) bool {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, _ = unix.Recvfrom(int(fd), b[:], unix.MSG_DONTWAIT|unix.MSG_PEEK)
	})
	return n > 0
}

// TestAcceptFloodDoesNotStall pins a bug: the loop accepted until the
// listener's queue was empty, so a flood of new connections kept it from
// an established connection's data (and from connect timeouts and
// closes). A turn of the loop takes a bounded number of connections, the
// established one gets its data while the flood still waits, and every
// connection of the flood is taken in later turns, though no new event
// comes for them.
func TestAcceptFloodDoesNotStall(t *testing.T) {
	epl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer epl.Close()
	l, addr := handLoop(t, epl.Addr().(*net.TCPAddr).AddrPort())
	client, err := net.DialTCP("tcp4", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	turnUntil(t, l, "connected", func() bool { return len(l.conns) == 1 && l.anyOpen() })
	up, err := epl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()

	const flood = 1000 // queued on the listener, the kernel's handshakes done
	for range flood {
		c, err := net.DialTCP("tcp4", nil, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if _, err := up.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	turnUntil(t, l, "the established connection's data delivered", func() bool { return hasData(client) })
	if taken := len(l.conns) - 1; taken >= flood {
		t.Errorf("the established connection got its data after the loop had taken the whole flood (%d connections), want it while most still wait", taken)
	}
	turnUntil(t, l, "every connection of the flood taken", func() bool { return len(l.conns) == flood+1 })
}

func (l *evLoop) anyOpen() bool {
	for c := range l.conns {
		if c.state == connOpen {
			return true
		}
	}
	return false
}

// TestPumpYieldsAfterBudget pins two bugs. One direction of a connection
// pumped until a socket would block, so one fast bulk stream held the
// loop; it must stop after its budget and finish in later turns, from
// the ready list. And a bulk connection kept its pipe (1 MiB) while idle;
// once the pipe is empty and the source has nothing, it goes back to the
// pool.
func TestPumpYieldsAfterBudget(t *testing.T) {
	l := idleLoop(t)
	defer l.shutdown()
	l.budget = copyBufSize
	client, endpoint := sockPair(t), sockPair(t) // [0]: the loop's side, [1]: the peer's
	c := &evConn{l: l, fd: [2]int{client[0], endpoint[0]}, state: connOpen, wr: [2]bool{true, true}}

	var sent []byte
	chunk := make([]byte, 4096)
	for i := 0; ; i++ {
		for j := range chunk {
			chunk[j] = byte(i*7 + j)
		}
		n, err := unix.Write(client[1], chunk)
		if n > 0 {
			sent = append(sent, chunk[:n]...)
		}
		if err != nil || n < len(chunk) {
			break
		}
	}
	if len(sent) <= 2*copyBufSize {
		t.Fatalf("the client socket took only %d bytes", len(sent))
	}
	c.rd[0] = true
	l.pump(c, 0)
	got := readAll(endpoint[1])
	if len(got) != copyBufSize || len(l.ready) != 1 {
		t.Fatalf("one pump moved %d of %d bytes and queued %d connections, want %d bytes (the budget) and the connection queued",
			len(got), len(sent), len(l.ready), copyBufSize)
	}
	for i := 0; len(got) < len(sent) || len(l.ready) > 0; i++ {
		if i > 10000 {
			t.Fatalf("endpoint got %d of %d bytes", len(got), len(sent))
		}
		c.wr[1] = true // the endpoint read: its socket is writable again
		if len(l.ready) > 0 {
			l.serveReady()
		} else {
			l.pump(c, 0)
		}
		got = append(got, readAll(endpoint[1])...)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("endpoint got %d bytes (equal: false), want the %d sent", len(got), len(sent))
	}
	if h := &c.dir[0]; !h.bulk || h.piped || len(l.pipes) != 1 {
		t.Errorf("idle bulk connection: bulk %v, holds a pipe %v, pipes in the pool %d; want bulk, no pipe held, 1 in the pool", h.bulk, h.piped, len(l.pipes))
	}
}

// TestLoopFailureFallsBack: a loop that stops on an error must not leave
// its frontends unserved; goroutines take them over.
func TestLoopFailureFallsBack(t *testing.T) {
	ep := byeServer(t)
	np := freePort(t)
	p := startProxier(t, Config{}, nodePortSnapshot(np, ep))
	addr := fmt.Sprintf("127.0.0.1:%d", np)
	if got := askBye(t, addr, "hello"); got != "bye:5" {
		t.Fatalf("before: got %q, want bye:5", got)
	}
	loops := p.tcpLoops()
	if len(loops) == 0 {
		t.Fatal("no event loop: the test would not exercise the Linux data path")
	}
	for _, l := range loops {
		l.file.Close() // the loop's wait fails
	}
	for i := range 3 {
		if got := askBye(t, addr, "hello"); got != "bye:5" {
			t.Fatalf("connection %d after the loops failed: got %q, want bye:5", i, got)
		}
	}
}
