package userspace

import (
	"net/netip"
	"syscall"
	"testing"
)

// boundSocket returns a TCP socket bound to a free loopback port, closed
// when the test ends, and its address. Bound, the port is held: no other
// process (the packages' tests run side by side) can take it, as it could
// a port merely found free.
func boundSocket(t testing.TB) (int, netip.AddrPort) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*syscall.SockaddrInet4).Port))
}

// deadEndpoint returns a loopback address that refuses connections for
// the rest of the test: a bound socket that never listens.
func deadEndpoint(t testing.TB) netip.AddrPort {
	t.Helper()
	_, ap := boundSocket(t)
	return ap
}
