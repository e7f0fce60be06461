package ingress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits of the pool of idle HTTP/1.1 connections to endpoints.
const (
	// maxIdlePerEndpoint is how many idle connections are kept per
	// endpoint, as nginx's keepalive directive bounds its cache.
	maxIdlePerEndpoint = 1024
	// idleConnTimeout closes a connection idle that long: endpoints
	// (Go's net/http among them) close theirs after a while too, and a
	// connection is better closed here than found closed at next use.
	idleConnTimeout = 60 * time.Second
)

// directTransport sends the simplest and most common requests (GET, HEAD
// and OPTIONS without a body or an upgrade) to an HTTP/1.1 endpoint from
// the handler's own goroutine: it writes the request with Request.Write
// and reads the answer with http.ReadResponse over a pooled connection.
// http.Transport hands every request to two goroutines of its connection
// and back; for a small response that costs more CPU than the proxying.
// Such requests can be sent again when a pooled connection turns out to
// be closed, as http.Transport does, since they change nothing.
type directTransport struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu   sync.Mutex
	idle map[string][]*directConn
}

type directConn struct {
	net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time // when it went idle
}

// direct says whether req may take the direct path.
func direct(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	return (req.Body == nil || req.Body == http.NoBody) && req.Header.Get("Upgrade") == "" &&
		req.Header.Get("Expect") == ""
}

// RoundTrip sends req on an idle connection to req.URL.Host, or on a new
// one when there is none or the idle one was closed by the endpoint.
func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	addr := req.URL.Host
	for {
		c, reused := t.get(addr)
		if c == nil {
			nc, err := t.dial(req.Context(), "tcp", addr)
			if err != nil {
				return nil, err
			}
			c = &directConn{Conn: nc, br: bufio.NewReaderSize(nc, 4<<10), bw: bufio.NewWriterSize(nc, 4<<10)}
		}
		resp, err := t.exchange(req, c)
		if err == nil {
			return resp, nil
		}
		c.Close()
		var noAnswer *noAnswerError
		if !reused || !errors.As(err, &noAnswer) || req.Context().Err() != nil {
			return nil, err
		}
		// The endpoint had closed the idle connection: try a fresh one.
	}
}

// noAnswerError is a failure before any byte of the response arrived.
type noAnswerError struct{ err error }

func (e *noAnswerError) Error() string { return e.err.Error() }
func (e *noAnswerError) Unwrap() error { return e.err }

// exchange writes req on c and reads the response head. A cancelled
// request context interrupts it by expiring the connection's deadline.
func (t *directTransport) exchange(req *http.Request, c *directConn) (*http.Response, error) {
	stop := context.AfterFunc(req.Context(), func() { c.SetDeadline(time.Unix(1, 0)) })
	if err := req.Write(c.bw); err != nil {
		stop()
		return nil, &noAnswerError{err}
	}
	if err := c.bw.Flush(); err != nil {
		stop()
		return nil, &noAnswerError{err}
	}
	var resp *http.Response
	for {
		if _, err := c.br.Peek(1); err != nil {
			stop()
			return nil, &noAnswerError{err}
		}
		var err error
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			stop()
			return nil, err
		}
		// 1xx answers before the final one (103 Early Hints) are skipped;
		// a 101 needs the upgrade path, which this request did not ask for.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	resp.Body = &directBody{ReadCloser: resp.Body, t: t, c: c, addr: req.URL.Host,
		reuse: !resp.Close && !req.Close, stop: stop}
	return resp, nil
}

// directBody returns its connection to the pool once read to the end,
// and closes it when closed before.
type directBody struct {
	io.ReadCloser
	t     *directTransport
	c     *directConn
	addr  string
	reuse bool
	stop  func() bool
	eof   bool
	done  bool
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *directBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.ReadCloser.Close()
	// A cancelled context may have set the deadline: such a connection
	// is not reused.
	if b.stop() && b.eof && b.reuse && err == nil && b.c.br.Buffered() == 0 {
		b.t.put(b.addr, b.c)
	} else {
		b.c.Close()
	}
	return err
}

func (t *directTransport) get(addr string) (*directConn, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[addr]
	for len(conns) > 0 {
		c := conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		if time.Since(c.used) < idleConnTimeout {
			t.idle[addr] = conns
			return c, true
		}
		c.Close()
	}
	delete(t.idle, addr)
	return nil, false
}

func (t *directTransport) put(addr string, c *directConn) {
	c.used = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = map[string][]*directConn{}
	}
	if len(t.idle[addr]) >= maxIdlePerEndpoint {
		c.Close()
		return
	}
	t.idle[addr] = append(t.idle[addr], c)
}

// closeIdle closes the connections idle longer than idleConnTimeout
// (all of them when all is set).
func (t *directTransport) closeIdle(now time.Time, all bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for addr, conns := range t.idle {
		kept := conns[:0]
		for _, c := range conns {
			if all || now.Sub(c.used) >= idleConnTimeout {
				c.Close()
			} else {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = kept
		}
	}
}
