package apiserver

import (
	"net"
	"sync"

	"k8s.io/klog/v2"
)

// closingListener is the API server's listener. It remembers the
// connections it accepted and, once the server has stopped listening and
// its in-flight requests have drained, closes every one still open.
//
// The HTTP/2 server's graceful shutdown sends GOAWAY only to connections
// it already serves when Shutdown begins. A client that dials as the
// server stops (a post-start hook or loopback informer of a server stopped
// while still starting) gets a connection accepted before the listener
// closed whose HTTP/2 side starts after that signal: it never hears
// GOAWAY, its client keeps it open, Shutdown waits out its whole timeout
// for it, and k8s.io/apiserver never closes it afterwards, so both ends
// outlive the server. Once requests have drained nothing on such a
// connection is still owed an answer.
type closingListener struct {
	net.Listener
	drained <-chan struct{}
	done    chan struct{} // closed by stop

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	once   sync.Once
}

func newClosingListener(l net.Listener, drained <-chan struct{}) *closingListener {
	return &closingListener{Listener: l, drained: drained, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
}

// Accept returns the next connection, remembered until it closes.
func (l *closingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		// Accepted as the listener closed: no one will serve it.
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// Close stops listening and, once requests have drained, closes the
// connections still open.
func (l *closingListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		go func() {
			select {
			case <-l.drained:
				if n := l.closeConns(); n > 0 {
					klog.V(2).InfoS("Closed connections still open after the API server drained its requests", "count", n)
				}
			case <-l.done:
			}
		}()
	})
	return err
}

// stop closes the connections still open once the server has returned,
// whether or not its requests drained, and ends the wait Close started.
func (l *closingListener) stop() {
	close(l.done)
	l.closeConns()
}

// closeConns closes the connections still open and returns how many.
func (l *closingListener) closeConns() int {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return len(conns)
}

func (l *closingListener) forget(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

// trackedConn is a connection closingListener accepted; it forgets it
// when closed.
type trackedConn struct {
	net.Conn
	l    *closingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.l.forget(c) })
	return c.Conn.Close()
}
