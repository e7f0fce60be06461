package ingress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"k8s.io/klog/v2"

	"portal.dev/portal/ingress/route"
)

// Portal's HTTP/1.1 connection loop serves the requests that make most
// of an Ingress's traffic, bodiless ones proxied to an HTTP/1.1 endpoint
// and the answers the controller gives itself (404, 503, redirects),
// without net/http's server, which spends per request a context, a
// response with its writers, two or three deadline changes, a goroutine
// watching the client that is stopped through a deadline, and a sort of
// the response's header keys: for a small request, more than the
// proxying. The loop reads a request head into the connection's buffer,
// parses it with http.ReadRequest and hands it to the same handler, with
// a response writer of its own (h1Response); its watch on the client, for
// requests that last, is the read of the next request, started early (on
// a plain connection, a wait on a duplicate of its descriptor: see
// rawloop_unix.go).
//
// Everything else is handed to net/http's server with the bytes read so
// far replayed, and the connection stays there: requests with a body or
// Expect, upgrades, CONNECT, HTTP/1.0 and HTTP/2 (h2c, and ALPN h2 over
// TLS, handed over before any byte is read), h2c endpoints, heads too
// large for the buffer, and anything the server would refuse (a head
// that does not parse, a missing or malformed Host, invalid fields), so
// that its answers are net/http's.

// headBufferSize is the connection's read buffer; a request head that
// does not fit is handed to net/http's server, which reads heads up to
// maxHeaderBytes.
const headBufferSize = 4 << 10

// errHandOff says the connection was handed to net/http's server.
var errHandOff = errors.New("connection handed to net/http's server")

// h1Conn is one client connection on the loop.
type h1Conn struct {
	s      *Servers
	l      *servedListener
	conn   net.Conn // raw, or a *tls.Conn over it after its handshake
	raw    net.Conn // the connection accepted
	remote string
	br     *bufio.Reader
	bw     *bufio.Writer
	bufs   *connBuffers // br, bw, head and resp's header map, pooled
	// ctx is every request's context; it ends when the client goes
	// away during a request, and when the servers end their requests
	// after the shutdown's grace.
	ctx    context.Context
	cancel context.CancelFunc
	// head is a copy of the request head being served, replayed to
	// net/http's server on a hand-off.
	head []byte
	resp h1Response
	// req is the proxy's state of the request being served.
	req request
	// lastSeries is the metrics' series of the last request.
	lastSeries lastSeries
	// tlsState is the connection's when it is over TLS, for the
	// requests' TLS.
	tlsState *tls.ConnectionState
	// served says a request was read before.
	served bool
	// headDeadline is when the head of the request being read must be
	// in: for the first, readHeaderTimeout from the accept; for the
	// next ones, from their first byte. It holds across a hand-off.
	headDeadline time.Time
	// readAt is the read deadline set on conn, zero for none.
	readAt time.Time
	// arrived is when the first bytes of a keep-alive request's head
	// were there, zero for a connection's first request.
	arrived time.Time
	// in is what br reads. reading says a request's head is being read,
	// headIdle that none of it is in yet after an idle wait, and
	// headArmed that the head's deadline is set: readHead resumes with
	// them after a wait in the raw read (rawloop_unix.go).
	in        clientReader
	reading   bool
	headIdle  bool
	headArmed bool
	// loopErr is how the loop in the raw read ended.
	loopErr error

	// The watch on the client during a request that has lasted
	// watchDelay: a read for the next request, into br, which notices a
	// client that went away. watchTimer starts it.
	watchTimer *time.Timer
	mu         sync.Mutex
	// inRequest says a request is being served and may be watched;
	// guarded by mu, as is watching while inRequest is set.
	inRequest bool
	// watchArmed says watchTimer is set or its function running, and
	// requestStart is when the request being served arrived; guarded
	// by mu.
	watchArmed   bool
	requestStart time.Time
	watching     bool
	watched      chan struct{}
	watchErr     error
	// watchFile is the duplicate of the connection's descriptor the
	// watch waits on while the loop holds the connection in its raw
	// read (watchRaw).
	watchFile *os.File

	// The end of the exchange with an endpoint under way, run when the
	// connection ends (end): exchangeEnd is set, guarded by mu, while
	// an exchange may be ended; stopExchange is the stop each exchange
	// is given, made at the first.
	exchangeEnd  func()
	stopExchange func() bool
}

// serve runs the loop until the client or the server ends the
// connection, or hands it to net/http's server.
func (c *h1Conn) serve() {
	c.take()
	defer c.release()
	c.resp.conn, c.resp.client = c, c.conn
	// No exchange is under way once the loop returns: the context
	// ends without ending one.
	defer c.cancel()
	c.remote = remoteAddr(c.raw)
	raw, err := c.loopRaw()
	if !raw {
		err = c.loop()
	}
	if errors.Is(err, errHandOff) {
		c.handOff()
		return
	}
	c.close()
}

// loop serves requests until one ends the connection, or hands it over
// (errHandOff).
func (c *h1Conn) loop() error {
	for {
		keep, err := c.next()
		switch {
		case err != nil:
			return err
		case !keep:
			return errLoopEnded
		}
	}
}

// errLoopEnded says a request ended the connection.
var errLoopEnded = errors.New("connection ended by its last request")

// errWouldBlock says the loop must wait until the client's connection is
// readable: inside the raw read (rawloop_unix.go), the step returns to
// wait and is called again when it is.
var errWouldBlock = errors.New("client connection not readable yet")

// next reads and answers one request, and says whether the connection
// may carry another. A request the loop does not serve is errHandOff.
func (c *h1Conn) next() (bool, error) {
	r, err := c.readRequest()
	if err != nil {
		return false, err
	}
	// A request's time runs from its head's first bytes, as nginx's
	// $request_time does, when they were waited for.
	start := c.arrived
	if start.IsZero() {
		start = time.Now()
	}
	l := c.l.handler
	host := hostname(r.Host)
	m := l.routes().Route(host, r.URL.Path, l.overTLS)
	if m.Backend != nil && m.Backend.Protocol == route.H2C {
		// An h2c endpoint takes http.Transport's path, which needs the
		// server's flushing and trailers.
		return false, errHandOff
	}
	c.resp.reset(r, r.Close || c.s.closing.Load())
	c.watch(start)
	ok := c.handle(r, host, m, start)
	c.unwatch()
	if !ok {
		return false, nil
	}
	return c.resp.finish(), nil
}

// readRequest waits for the next request head and parses it. A request
// the loop does not serve is errHandOff; a connection closed or idle too
// long is another error. In the raw read, errWouldBlock says to wait and
// call again.
func (c *h1Conn) readRequest() (*http.Request, error) {
	if !c.reading {
		if err := c.beginHead(); err != nil {
			return nil, err
		}
	}
	end, err := c.readHead()
	if err != nil {
		return nil, err
	}
	c.reading = false
	c.head = append(c.head, peekBuffered(c.br)[:end]...)
	before := c.br.Buffered()
	r, err := http.ReadRequest(c.br)
	if err != nil {
		// The parser stopped within the head: what it left of it is
		// in head, to replay.
		c.br.Discard(end - (before - c.br.Buffered()))
		return nil, errHandOff
	}
	if !c.serves(r) {
		return nil, errHandOff
	}
	r.RemoteAddr = c.remote
	r.TLS = c.tlsState
	// r keeps the background context: the handler takes the
	// connection's from the response writer (recorder.context).
	return r, nil
}

// beginHead sets out to read the next request head.
func (c *h1Conn) beginHead() error {
	c.head = c.head[:0]
	c.arrived = time.Time{}
	// A new connection's first request has the head's time from the
	// accept: a client that connects and says nothing is not an idle
	// keep-alive one.
	idle := c.served
	c.served = true
	if idle {
		if t, ok := nextDeadline(c.readAt, time.Now(), idleTimeout); ok {
			c.setReadDeadline(t)
		}
	} else {
		c.setReadDeadline(c.headDeadline)
	}
	if c.s.closing.Load() {
		return errServerClosing
	}
	c.reading, c.headIdle, c.headArmed = true, idle, !idle
	return nil
}

// errServerClosing ends a connection between requests at shutdown.
var errServerClosing = errors.New("server closing")

// readHead waits until a whole request head is buffered, and returns its
// length. The first bytes may wait as long as beginHead set; after an
// idle wait, the rest of the head has readHeaderTimeout from them. A
// head that does not fit the buffer is errHandOff.
func (c *h1Conn) readHead() (int, error) {
	for {
		if _, err := c.peek(); err != nil {
			return 0, err
		}
		if c.headIdle {
			c.headIdle = false
			c.arrived = time.Now()
			c.headDeadline = c.arrived.Add(readHeaderTimeout)
		}
		buf := peekBuffered(c.br)
		if end := headEnd(buf); end > 0 {
			return end, nil
		}
		if len(buf) == headBufferSize || len(buf) >= 4 && string(buf[:4]) == "PRI " {
			// A long head, or HTTP/2's preface (which never ends as an
			// HTTP/1.1 head does) on the plain listener.
			return 0, errHandOff
		}
		if !c.headArmed {
			c.headArmed = true
			c.setReadDeadline(c.headDeadline)
		}
		// Wait for more: Peek asks for one more byte than buffered.
		if _, err := c.br.Peek(len(buf) + 1); err != nil && c.br.Buffered() == len(buf) {
			return 0, err
		}
	}
}

// peek waits for at least one byte in br: the watch's read, when one ran,
// or a read now (a watch on a duplicate of the descriptor is ended first).
func (c *h1Conn) peek() (int, error) {
	if c.watchFile != nil {
		c.stopWatchRaw()
	}
	if c.watching {
		<-c.watched
		c.watching = false
		if err := c.watchErr; err != nil && c.br.Buffered() == 0 {
			c.watchErr = nil
			return 0, err
		}
	}
	if n := c.br.Buffered(); n > 0 {
		return n, nil
	}
	_, err := c.br.Peek(1)
	return c.br.Buffered(), err
}

// headEnd is the length of the request head at the start of buf, the
// empty line included, or 0 when buf holds no whole head.
func headEnd(buf []byte) int {
	end := 0
	if i := bytes.Index(buf, []byte("\n\r\n")); i >= 0 {
		end = i + 3
	}
	// Bare line feeds end lines too, as net/textproto reads them.
	if i := bytes.Index(buf, []byte("\n\n")); i >= 0 && (end == 0 || i+2 < end) {
		end = i + 2
	}
	return end
}

// peekBuffered is what br holds, without reading.
func peekBuffered(br *bufio.Reader) []byte {
	b, _ := br.Peek(br.Buffered())
	return b
}

// serves says whether the loop serves r itself: a bodiless HTTP/1.1
// request the server would take, with nothing to switch protocols or
// wait for.
func (c *h1Conn) serves(r *http.Request) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.Body != http.NoBody ||
		r.Method == http.MethodConnect || r.RequestURI == "*" {
		return false
	}
	if len(r.Header["Upgrade"]) > 0 || len(r.Header["Expect"]) > 0 {
		return false
	}
	// What net/http's server refuses, it answers itself. ReadRequest
	// took the Host field out of the header: a request without one has
	// no Host, unless its target is absolute (rare; handed over too).
	if r.Host == "" || r.URL.Host != "" || !httpguts.ValidHostHeader(r.Host) {
		return false
	}
	for k, vv := range r.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// handle runs the handler; a panic ends the connection without more of
// the response, as net/http's server does.
func (c *h1Conn) handle(r *http.Request, host string, m route.Match, start time.Time) (ok bool) {
	defer func() {
		if err := recover(); err != nil {
			if err != http.ErrAbortHandler {
				klog.ErrorS(nil, "Ingress handler panicked", "panic", err, "remote", c.remote)
			}
			ok = false
		}
	}()
	c.l.handler.serveMatch(&c.resp, r, &c.req, host, m, start)
	return true
}

// watchDelay is how long a request runs before its client's connection
// is watched. Most requests end sooner, and a watch costs a goroutine, a
// hand-off of the next request to the loop and two deadline changes (on a
// plain connection, a duplicate descriptor in the poller). A
// client that goes away has its request ended at most watchDelay after.
const watchDelay = 5 * time.Millisecond

// watch arms the watch of the connection for the time of the request, so
// that a client that goes away ends the request's context, as net/http's
// server does. A client that does not wait for the answer (pipelining)
// has sent its next request already, and is not watched. start is when
// the request arrived.
//
// The timer is not stopped at the request's end: on a busy connection it
// stays set across requests, and when it fires it sets itself again for
// what is left of the current request's watchDelay. That is one timer
// change per watchDelay rather than a Reset and a Stop per request.
func (c *h1Conn) watch(start time.Time) {
	if c.br.Buffered() > 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inRequest = true
	c.requestStart = start
	if c.watchArmed {
		return
	}
	c.watchArmed = true
	if c.watchTimer == nil {
		c.watchTimer = time.AfterFunc(watchDelay, c.startWatch)
	} else {
		c.watchTimer.Reset(watchDelay)
	}
}

// unwatch ends the time a watch may start in; one started goes on until
// the next request arrives or the connection ends.
func (c *h1Conn) unwatch() {
	c.mu.Lock()
	c.inRequest = false
	c.mu.Unlock()
}

// startWatch starts a read of the connection while a request is served.
// It reads into br what comes next: the next request, which is then no
// longer watched.
func (c *h1Conn) startWatch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inRequest && !c.watching {
		// The request's arrival is read before the timer was set for
		// it: what is left may be a little short, which starts the
		// watch as much sooner, and no harm.
		if left := watchDelay - time.Since(c.requestStart); left > 0 {
			c.watchTimer.Reset(left)
			return
		}
	}
	c.watchArmed = false
	if !c.inRequest || c.watching {
		return
	}
	// The read waits as long as the request lasts; the loop sets the
	// idle deadline once it has ended.
	c.setReadDeadline(time.Time{})
	if c.watched == nil {
		c.watched = make(chan struct{}, 1)
	}
	if c.in.inRaw {
		c.watching = c.watchRaw()
		return
	}
	c.watching = true
	go c.watchClient()
}

func (c *h1Conn) watchClient() {
	_, err := c.br.Peek(1)
	if err != nil && !isTimeout(err) {
		c.end()
	}
	c.watchErr = err
	c.watched <- struct{}{}
}

// AfterFunc arranges for f, the end of an exchange with an endpoint, to
// run when the connection ends (end) before stop is called: the client
// went away, or the servers shut down. The connection's end runs it
// itself, rather than through context.AfterFunc on ctx, whose
// registration takes a lock, a map and four allocations for each
// connection, and its removal a lock again.
func (c *h1Conn) AfterFunc(f func()) (stop func() bool) {
	if c.stopExchange == nil {
		c.stopExchange = c.stopExchangeEnd
	}
	c.mu.Lock()
	// end cancels ctx before it looks for an exchange to end: a context
	// that has not ended yet will have f run by end after this.
	ended := c.ctx.Err() != nil
	if !ended {
		c.exchangeEnd = f
	}
	c.mu.Unlock()
	if ended {
		f()
		return alreadyEnded
	}
	return c.stopExchange
}

func alreadyEnded() bool { return false }

// end ends the connection's context and the exchange under way, if any,
// in a goroutine of its own as context.AfterFunc would: the client went
// away, or the servers end their requests.
func (c *h1Conn) end() {
	c.cancel()
	c.mu.Lock()
	f := c.exchangeEnd
	c.exchangeEnd = nil
	c.mu.Unlock()
	if f != nil {
		go f()
	}
}

// stopExchangeEnd is AfterFunc's stop: it says false when the end ran.
func (c *h1Conn) stopExchangeEnd() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	armed := c.exchangeEnd != nil
	c.exchangeEnd = nil
	return armed
}

// setReadDeadline sets the deadline of the reads of the client;
// Servers.shutdown sets a past one on every connection after closing.
func (c *h1Conn) setReadDeadline(t time.Time) {
	c.conn.SetReadDeadline(t)
	c.readAt = t
}

// handOff gives the connection, with what was read of it, to net/http's
// server.
func (c *h1Conn) handOff() {
	replay := append(c.head, peekBuffered(c.br)...)
	c.head = nil // the replay's now, not to be reused
	c.conn.SetReadDeadline(time.Time{})
	c.l.handOff(&replayConn{Conn: c.conn, replay: replay, headDeadline: c.headDeadline})
}

// close ends the connection, once the watch's read has returned.
func (c *h1Conn) close() {
	c.conn.Close()
	if c.watching {
		<-c.watched
		c.watching = false
	}
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
