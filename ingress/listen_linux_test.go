package ingress

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// Both listeners hold a new connection back until its client has sent
// something (TCP_DEFER_ACCEPT), as nginx's `deferred` does, so that the
// first read of each finds data.
func TestListenersDeferAccept(t *testing.T) {
	o := DefaultOptions()
	o.BindAddress = "127.0.0.1"
	o.HTTPPort, o.HTTPSPort = freePort(t), freePort(t)
	h := NewHandler(func() Routes { return &fakeRoutes{} }, o, NewMetrics())
	s, err := Listen(o, h, func() Routes { return &fakeRoutes{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, l := range s.listeners {
		rc, err := l.ln.(*net.TCPListener).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		var gerr error
		rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT) })
		if gerr != nil || v == 0 {
			t.Errorf("listener %s: TCP_DEFER_ACCEPT is %d (%v), want it set", l.ln.Addr(), v, gerr)
		}
	}
}

// freePort is a loopback port nothing listens on at the time.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
