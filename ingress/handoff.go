package ingress

import (
	"net"
	"sync"
	"time"
)

// handOffListener is the listener net/http's server serves: the
// connections the loop hands to it, one at a time.
type handOffListener struct {
	addr  net.Addr
	conns chan net.Conn

	once   sync.Once
	closed chan struct{}
}

func newHandOffListener(addr net.Addr) *handOffListener {
	return &handOffListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept returns the next connection handed over.
func (l *handOffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close ends Accept; connections handed over later are closed.
func (l *handOffListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is the address of the listener the connections came from.
func (l *handOffListener) Addr() net.Addr { return l.addr }

// handOff gives c to the server, or closes it when the server is gone.
func (l *handOffListener) handOff(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

// replayConn is a connection handed over after some of it was read: its
// reads return those bytes first.
type replayConn struct {
	net.Conn
	replay []byte
	// headDeadline is the deadline of the head being read when the
	// connection was handed over. net/http's server sets its header
	// deadline first; it is held to this one, so that the head's time
	// is counted once.
	headDeadline time.Time
}

// SetReadDeadline sets the connection's, the first one no later than
// headDeadline.
func (c *replayConn) SetReadDeadline(t time.Time) error {
	if !c.headDeadline.IsZero() {
		if t.IsZero() || t.After(c.headDeadline) {
			t = c.headDeadline
		}
		c.headDeadline = time.Time{}
	}
	return c.Conn.SetReadDeadline(t)
}

// Read returns the bytes to replay, then the connection's.
func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.replay) > 0 {
		n := copy(p, c.replay)
		c.replay = c.replay[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn is the connection under the replay, as tls.Conn's NetConn.
func (c *replayConn) NetConn() net.Conn { return c.Conn }

// CloseWrite shuts down the writing side of the connection, as net/http's
// server does before closing after an error answer.
func (c *replayConn) CloseWrite() error { return closeWrite(c.Conn) }

// closeWrite shuts down the writing side of c when it can.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
