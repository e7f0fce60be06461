//go:build !linux

package userspace

import (
	"net/netip"
	"testing"
)

// deadEndpoint returns a loopback address nothing listens on.
func deadEndpoint(t testing.TB) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freePort(t))
}
