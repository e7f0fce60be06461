package ingress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
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

// A request net/http's server reads on a TLS connection the loop handed
// over has the connection's TLS state, as one the loop serves has: the
// server sees the replay over the *tls.Conn, not a *tls.Conn.
func TestHandedOverTLSState(t *testing.T) {
	for _, overTLS := range []bool{false, true} {
		tb := &testBed{routes: &fakeRoutes{}}
		h := NewHandler(func() Routes { return tb.routes }, DefaultOptions(), NewMetrics())
		s := &Servers{}
		conf := &tls.Config{}
		if !overTLS {
			conf = nil
		}
		s.add(pipeListener{}, h, conf)
		srv := s.listeners[0].srv
		var conn net.Conn
		conn, other := net.Pipe()
		defer other.Close()
		if overTLS {
			conn = tls.Server(conn, conf)
		}
		ctx := srv.ConnContext(context.Background(), &replayConn{Conn: conn})
		r := httptest.NewRequestWithContext(ctx, "GET", "http://foo.com/", nil)
		srv.Handler.ServeHTTP(httptest.NewRecorder(), r)
		if got := r.TLS != nil; got != overTLS {
			t.Errorf("over TLS %v: got the request's TLS set %v, want %v", overTLS, got, overTLS)
		}
	}
}

// failingListener fails each Accept with the next of errs.
type failingListener struct {
	pipeListener
	errs []error
}

func (l *failingListener) Accept() (net.Conn, error) {
	err := l.errs[0]
	l.errs = l.errs[1:]
	return nil, err
}

// A listener that fails for good is reported, after the failures that
// may pass (out of file descriptors) were waited out, as net/http's
// server does. Pins the bug where every network error was retried
// forever, so a broken listener was never reported.
func TestAcceptFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EINVAL)}
		tooMany := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
		s := &Servers{}
		l := &servedListener{ln: &failingListener{errs: []error{tooMany, tooMany, broken}}}
		if err := s.accept(l); err != broken {
			t.Errorf("got %v, want the listener's failure %v", err, broken)
		}
	})
}
