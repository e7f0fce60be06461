package dialcheck

import (
	"context"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

type fakeDialer struct{ err error }

func (f fakeDialer) DialContext(context.Context, string, string) (net.Conn, error) {
	if f.err != nil {
		return nil, f.err
	}
	c, s := net.Pipe()
	s.Close()
	return c, nil
}

func TestCheck(t *testing.T) {
	addr := netip.MustParseAddrPort("10.244.1.5:8080")
	tests := []struct {
		name     string
		err      error
		protocol string
		want     string
	}{
		{"accepted", nil, "TCP", Open},
		{"reset", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "TCP", Refused},
		{"no route", &net.OpError{Op: "dial", Err: syscall.EHOSTUNREACH}, "", Unreachable},
		{"no answer", context.DeadlineExceeded, "TCP", Timeout},
		{"udp is not dialed", nil, "UDP", Unchecked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(context.Background(), fakeDialer{tc.err}, addr, tc.protocol, time.Second)
			if got.Result != tc.want || got.Address != "10.244.1.5:8080" {
				t.Errorf("got %+v, want result %s", got, tc.want)
			}
		})
	}
}
