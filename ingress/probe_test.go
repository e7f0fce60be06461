//go:build unix

package ingress

import (
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"
)

// keepAlive reports whether TCP keep-alive probes are on for c.
func keepAlive(t *testing.T, c *net.TCPConn) bool {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on int
	raw.Control(func(fd uintptr) {
		on, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
	})
	if err != nil {
		t.Fatal(err)
	}
	return on != 0
}

// Client connections are accepted without TCP keep-alive probes, which
// cost system calls at each connection; they are turned on for those the
// server's timeouts do not bound: upgrades and HTTP/2.
func TestProbeUnboundedConnections(t *testing.T) {
	for _, tc := range []struct {
		name    string
		major   int
		upgrade string
		want    bool
	}{
		{name: "HTTP/1.1 request", major: 1},
		{name: "upgrade", major: 1, upgrade: "websocket", want: true},
		{name: "HTTP/2 request", major: 2, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := net.ListenConfig{KeepAlive: -1}
			ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			conn, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if keepAlive(t, conn.(*net.TCPConn)) {
				t.Fatal("keep-alive on at accept, want off")
			}
			ctx := context.WithValue(context.Background(), clientConnKey{}, &clientConn{conn: conn})
			r, _ := http.NewRequestWithContext(ctx, "GET", "http://foo.com/", nil)
			r.ProtoMajor = tc.major
			if tc.upgrade != "" {
				r.Header.Set("Upgrade", tc.upgrade)
			}
			probe(r)
			if got := keepAlive(t, conn.(*net.TCPConn)); got != tc.want {
				t.Errorf("keep-alive: got %v, want %v", got, tc.want)
			}
		})
	}
}
