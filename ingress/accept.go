package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"
)

// accept serves the connections of l on the loop until l is closed.
// Failures to accept that may pass (out of file descriptors) are waited
// out as net/http's server does, up to a second between tries.
func (s *Servers) accept(l *servedListener) error {
	var delay time.Duration
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !temporary(err) {
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.serve(l, conn)
	}
}

// temporary says whether a failure to accept may pass: out of file
// descriptors or memory, or a timeout. Any other leaves the listener
// broken, and is reported rather than retried forever.
func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// serveConn serves one accepted connection: over TLS, after its
// handshake, which hands HTTP/2 to net/http's server at once.
func (s *Servers) serveConn(l *servedListener, raw net.Conn) {
	conn := raw
	if d := l.handler.opts.ClientSendTimeout; d > 0 {
		conn = &sendTimeoutConn{Conn: raw, timeout: d}
	}
	// The first request's head, TLS handshake included, has
	// readHeaderTimeout from the accept, as nginx's client_header_timeout.
	c := &h1Conn{s: s, l: l, conn: conn, raw: raw, headDeadline: time.Now().Add(readHeaderTimeout)}
	// Not a child of the servers' base context, which would take a
	// lock and a map entry to add and again to remove for each
	// connection: shutdown ends it with the others. Having no parent,
	// it needs no cancel on the paths that never serve it.
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if !s.track(c) {
		conn.Close()
		return
	}
	defer s.untrack(c)
	if l.tlsConf != nil {
		tc := handshake(conn, l.tlsConf, c.headDeadline)
		if tc == nil {
			return
		}
		st := tc.ConnectionState()
		if st.NegotiatedProtocol == "h2" {
			l.handOff(tc)
			return
		}
		c.conn, c.tlsState = tc, &st
	}
	c.serve()
}

// remoteAddr is the client's address as net/http's server gives it in
// Request.RemoteAddr ("192.0.2.1:5678", "[2001:db8::1]:5678"), made with
// one allocation where TCPAddr.String makes three.
func remoteAddr(c net.Conn) string {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return c.RemoteAddr().String()
	}
	ap := a.AddrPort()
	// A client of a dual-stack listener is an IPv4-mapped address;
	// TCPAddr.String shows it as IPv4.
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// handshake runs the TLS handshake of conn, bounded by the first request
// head's deadline, and returns the TLS connection, or nil after closing conn when the
// handshake failed. A client that spoke plain HTTP is told so, as
// net/http's server tells it.
func handshake(conn net.Conn, conf *tls.Config, deadline time.Time) *tls.Conn {
	tc := tls.Server(conn, conf)
	conn.SetDeadline(deadline)
	if err := tc.Handshake(); err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		conn.Close()
		return nil
	}
	conn.SetDeadline(time.Time{})
	return tc
}

// sendTimeoutConn bounds each write to the client, on the loop and
// after a hand-off, TLS records included, as nginx's send_timeout does:
// a client that stops reading has its connection closed, rather than
// holding it and the endpoint's. Each write has the whole timeout, so a
// slow client or a long-lived WebSocket is not cut off; the deadline
// moves only when it would leave a write less (nextDeadline).
type sendTimeoutConn struct {
	net.Conn
	timeout time.Duration
	// at is the write deadline set, in Unix nanoseconds, 0 for none.
	// Atomic: after a hand-off, net/http's server may write from
	// more than one goroutine, one after another.
	at atomic.Int64
}

func (c *sendTimeoutConn) Write(p []byte) (int, error) {
	c.armWrite()
	return c.Conn.Write(p)
}

// armWrite sets the send timeout for a write about to start, Write's or
// one made straight to the connection accepted (a spliced body).
func (c *sendTimeoutConn) armWrite() {
	var at time.Time
	if ns := c.at.Load(); ns != 0 {
		at = time.Unix(0, ns)
	}
	if t, ok := nextDeadline(at, time.Now(), c.timeout); ok {
		c.Conn.SetWriteDeadline(t)
		c.at.Store(t.UnixNano())
	}
}

// SetDeadline sets the connection's deadlines; the next write sets its
// own again.
func (c *sendTimeoutConn) SetDeadline(t time.Time) error {
	c.at.Store(0)
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline sets the connection's write deadline; the next write
// sets its own again.
func (c *sendTimeoutConn) SetWriteDeadline(t time.Time) error {
	c.at.Store(0)
	return c.Conn.SetWriteDeadline(t)
}

// NetConn is the connection accepted, as tls.Conn's NetConn.
func (c *sendTimeoutConn) NetConn() net.Conn { return c.Conn }

// CloseWrite shuts down the writing side of the connection accepted.
func (c *sendTimeoutConn) CloseWrite() error { return closeWrite(c.Conn) }

// looksLikeHTTP says whether the first bytes of what should have been a
// TLS record are a plain HTTP request's.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// track notes c as served by the loop, unless the servers are closing.
func (s *Servers) track(c *h1Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*h1Conn]struct{})
	}
	s.conns[c] = struct{}{}
	s.handlers.add(1)
	return true
}

func (s *Servers) untrack(c *h1Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	s.handlers.add(-1)
}

// eachConn calls f for each connection on the loop.
func (s *Servers) eachConn(f func(*h1Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		f(c)
	}
}

// handOff gives conn to the listener's net/http server.
func (l *servedListener) handOff(conn net.Conn) {
	l.handedOff.Add(1)
	l.handoff.handOff(conn)
}
