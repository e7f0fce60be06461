package ingress

import (
	"io"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener is a listener for Servers.add whose connections the test
// serves itself.
type pipeListener struct{ net.Listener }

func (pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }
func (pipeListener) Close() error   { return nil }

// The first request's head has readHeaderTimeout from the accept, once,
// as nginx's client_header_timeout: a client that sends a byte just
// before the deadline gains nothing, nor one whose head outgrows the
// loop's buffer and goes to net/http's server. Pins the bug where the
// first bytes restarted the count, and the hand-off restarted it again.
func TestHeaderTimeoutFromAccept(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sends []string
		at    []time.Duration // of each send, from the accept
	}{
		{"loop", []string{"G", "ET / HTTP/1.1\r\n"}, []time.Duration{readHeaderTimeout / 2, readHeaderTimeout - time.Second}},
		{"handed over", []string{"GET / HTTP/1.1\r\n", "X-Long: " + strings.Repeat("a", headBufferSize) + "\r\n", "X"},
			[]time.Duration{0, readHeaderTimeout / 2, readHeaderTimeout - time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tb := &testBed{routes: &fakeRoutes{}}
				h := NewHandler(func() Routes { return tb.routes }, DefaultOptions(), NewMetrics())
				s := &Servers{}
				s.add(pipeListener{}, h, nil)
				l := s.listeners[0]
				go l.srv.Serve(l.handoff)
				defer func() {
					l.handoff.Close()
					l.srv.Close()
				}()
				client, server := net.Pipe()
				defer client.Close()
				start := time.Now()
				go s.serveConn(l, server)
				for i, p := range tc.sends {
					time.Sleep(time.Until(start.Add(tc.at[i])))
					io.WriteString(client, p)
				}
				io.Copy(io.Discard, client)
				if got := time.Since(start); got != readHeaderTimeout {
					t.Errorf("the connection was closed %v after the accept, want %v", got, readHeaderTimeout)
				}
			})
		})
	}
}
