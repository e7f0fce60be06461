package ingress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// errUnrequestedUpgrade is a 101 Switching Protocols to a request that
// asked for no upgrade.
var errUnrequestedUpgrade = errors.New("endpoint switched protocols, which the request did not ask for")

// aLongTimeAgo is a deadline in the past: set on a connection, it ends
// the reads and writes under way.
var aLongTimeAgo = time.Unix(1, 0)

// backendConn is an HTTP/1.1 connection to an endpoint on the direct
// path, kept in its endpoint's pool between requests.
type backendConn struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	// idleSince is when it went back to the pool.
	idleSince time.Time

	// read is the read timeout: each read from the endpoint has it whole,
	// as nginx's proxy_read_timeout, and the time the proxy spends
	// writing to the client between reads does not count.
	read time.Duration
	// readAt is the read deadline set, zero for none. It stays when the
	// connection goes back to the pool, where nothing reads it, and moves
	// only when a read needs more time than it leaves (nextDeadline).
	readAt time.Time
	// armed says the read deadline was set for the next read already.
	armed bool
	// headLeft is how much more of a response head may be read; negative
	// while no head is read.
	headLeft int64
	// written counts the bytes of the request sent, answered says whether
	// a byte of the response came.
	written  int
	answered bool
	// stop ends the watch on the client's request; it returns false
	// when the request had ended and the connection's deadline was set.
	stop func() bool
	// abort, the watch's action, ends the reads and writes under way.
	abort func()

	// What alive and sendAndAwait need, made once: a request makes no
	// garbage for them.
	rawConn  syscall.RawConn
	peekFunc func(fd uintptr) bool
	peekBuf  [1]byte
	idle     bool
	sendFunc func(fd uintptr) bool
	// unsentHead is what sendAndAwait has yet to write; sendDone says it
	// wrote it all, sendErr why it could not.
	unsentHead []byte
	sendDone   bool
	sendErr    error
}

// requestEnd is the end of a client's request (the client went away, the
// servers shut down), which ends the exchange with the endpoint too.
type requestEnd interface {
	// AfterFunc arranges for f to run when the request ends, as
	// context.AfterFunc does; stop undoes it, and says false when f was
	// started.
	AfterFunc(f func()) (stop func() bool)
}

// contextEnd is the end of a request's context.
type contextEnd struct{ ctx context.Context }

func (e contextEnd) AfterFunc(f func()) func() bool { return context.AfterFunc(e.ctx, f) }

func newBackendConn(c net.Conn) *backendConn {
	bc := &backendConn{conn: c, headLeft: -1}
	bc.abort = func() { bc.conn.SetDeadline(aLongTimeAgo) }
	bc.br = bufio.NewReaderSize(bc, 4<<10)
	bc.bw = bufio.NewWriterSize(bc, 4<<10)
	return bc
}

// Read reads from the endpoint for br, under the read timeout and the
// limit of the response head.
func (c *backendConn) Read(p []byte) (int, error) {
	if c.headLeft == 0 {
		return 0, fmt.Errorf("response header over %d bytes", maxResponseHeaderBytes)
	}
	if c.headLeft > 0 && int64(len(p)) > c.headLeft {
		p = p[:c.headLeft]
	}
	if c.armed {
		c.armed = false
	} else {
		c.armRead()
	}
	n, err := c.conn.Read(p)
	if c.headLeft > 0 {
		c.headLeft -= int64(n)
	}
	if n > 0 {
		c.answered = true
	}
	return n, err
}

// armRead sets the read timeout for a read about to start.
func (c *backendConn) armRead() {
	if c.read > 0 {
		if t, ok := nextDeadline(c.readAt, time.Now(), c.read); ok {
			c.setReadDeadline(t)
		}
	} else if !c.readAt.IsZero() {
		c.setReadDeadline(time.Time{})
	}
}

func (c *backendConn) setReadDeadline(t time.Time) {
	c.conn.SetReadDeadline(t)
	c.readAt = t
}

// uncheckedIdle is how long a pooled connection may have been idle and
// still carry a replayable request without the check of usable.
const uncheckedIdle = 100 * time.Millisecond

// usable says whether the pooled c may carry a request, replayable or
// not, at now. The check (alive) costs a system call, so it is made only
// where a failure it catches would not be handled anyway. A replayable
// request is sent again on a new connection when the endpoint had closed
// c (EOF or reset before any answer) or answers 408 to it; what remains
// is a response nobody asked for, sent while c was idle, which would be
// read as this request's answer. Endpoints send those when they time an
// idle connection out, after seconds, so c is checked when it has been
// idle for uncheckedIdle or longer; a busy connection, idle for
// microseconds between requests, is not. A read deadline kept from c's
// last request that has passed is cleared first: it would fail the
// check.
func (c *backendConn) usable(now time.Time, replayable bool) bool {
	if replayable && now.Sub(c.idleSince) < uncheckedIdle {
		return true
	}
	if !c.readAt.IsZero() && !now.Before(c.readAt) {
		c.setReadDeadline(time.Time{})
	}
	return c.alive()
}

// Write writes to the endpoint for bw.
func (c *backendConn) Write(p []byte) (int, error) {
	n, err := c.conn.Write(p)
	c.written += n
	return n, err
}

// roundTrip sends out and reads the response head, passing 1xx answers
// to info. The end of the client's request, end, ends the exchange. A
// request head (at most maxHeaderBytes) fits the sockets'
// buffers, so its write is not timed: the send timeout is for bodies,
// which take http.Transport's path.
func (c *backendConn) roundTrip(end requestEnd, out *upstreamRequest, a *attempt, info func(int, http.Header)) (*http.Response, error) {
	c.written, c.answered, c.read = 0, false, a.read
	c.stop = end.AfterFunc(c.abort)
	head := out.appendHead(c.bw.AvailableBuffer())
	// The deadline is set once for the write and the first read of
	// the answer, which follows at once.
	c.armRead()
	c.armed = true
	sent, err := c.sendAndAwait(head)
	if err != nil {
		return nil, err
	}
	if !sent {
		// What sendAndAwait did not write goes the usual way; head
		// lies in bw's free space, which Write copies it within.
		if _, err := c.bw.Write(head[c.written:]); err != nil {
			return nil, err
		}
		if err := c.bw.Flush(); err != nil {
			return nil, err
		}
	}
	defer func() { c.headLeft = -1 }()
	for n := 0; ; n++ {
		c.headLeft = maxResponseHeaderBytes
		resp, err := http.ReadResponse(c.br, out.r)
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errUnrequestedUpgrade
		case resp.StatusCode >= 200:
			return resp, nil
		case n == max1xxResponses:
			return nil, errTooMany1xx
		}
		info(resp.StatusCode, resp.Header)
	}
}

// unsent says whether nothing of the last request reached the endpoint.
func (c *backendConn) unsent() bool { return c.written == 0 }

// finish ends the exchange of resp, whose body was read to the end, and
// says whether the connection may carry another request: not when
// either side asked to close it, the client's request ended meanwhile,
// or the endpoint sent more than the response.
func (c *backendConn) finish(resp *http.Response) bool {
	resp.Body.Close()
	if c.stop() && !resp.Close && c.br.Buffered() == 0 {
		c.stop = nil
		return true
	}
	c.close()
	return false
}

func (c *backendConn) close() {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
	c.conn.Close()
}

// getIdle takes a pooled connection to e, nil when there is none. Those
// idle too long are closed on the way.
func (e *endpoint) getIdle(now time.Time) *backendConn {
	e.mu.Lock()
	defer e.mu.Unlock()
	for n := len(e.idle); n > 0; n = len(e.idle) {
		c := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		if now.Sub(c.idleSince) < idleConnTimeout {
			return c
		}
		c.conn.Close()
	}
	return nil
}

// putIdle pools c for the next request to e, or closes it when the pool
// is full or e forgotten.
func (e *endpoint) putIdle(c *backendConn, now time.Time) {
	c.idleSince = now
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.forgotten || len(e.idle) >= maxIdlePerEndpoint {
		c.conn.Close()
		return
	}
	e.idle = append(e.idle, c)
}

// closeIdle closes e's pooled connections that went idle before oldest,
// all of them when forget is set; a forgotten e closes the connections
// returned to it later too.
func (e *endpoint) closeIdle(oldest time.Time, forget bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	kept := e.idle[:0]
	for _, c := range e.idle {
		if forget || c.idleSince.Before(oldest) {
			c.conn.Close()
		} else {
			kept = append(kept, c)
		}
	}
	clear(e.idle[len(kept):])
	e.idle = kept
	e.forgotten = e.forgotten || forget
}
