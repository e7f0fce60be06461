package ingress

import (
	"net"
	"testing"
)

// remoteAddrConn is a connection with only a remote address.
type remoteAddrConn struct {
	net.Conn
	addr net.Addr
}

func (c remoteAddrConn) RemoteAddr() net.Addr { return c.addr }

// A request's RemoteAddr reads as net/http's server writes it.
func TestRemoteAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr
		want string
	}{
		{"IPv4", &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 5678}, "192.0.2.1:5678"},
		{"IPv4 as 4 bytes", &net.TCPAddr{IP: net.IP{192, 0, 2, 1}, Port: 5678}, "192.0.2.1:5678"},
		{"IPv6", &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443}, "[2001:db8::1]:443"},
		{"IPv6 with zone", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 80, Zone: "eth0"}, "[fe80::1%eth0]:80"},
		{"not TCP", &net.UnixAddr{Name: "@x", Net: "unix"}, "@x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := remoteAddr(remoteAddrConn{addr: tc.addr})
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if tcp, ok := tc.addr.(*net.TCPAddr); ok && got != tcp.String() {
				t.Errorf("got %q, TCPAddr.String says %q", got, tcp.String())
			}
		})
	}
}
