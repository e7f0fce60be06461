package userspace

import (
	"net/netip"
	"syscall"
	"testing"
)

// deadEndpoint returns a loopback address that refuses connections for
// the rest of the test: a TCP socket bound to it that never listens holds
// the port, so no other process (the packages' tests run side by side)
// can start listening there, as it could on a port merely found free.
func deadEndpoint(t testing.TB) netip.AddrPort {
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
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*syscall.SockaddrInet4).Port))
}
