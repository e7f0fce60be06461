package ingress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"
)

// A large response body of known length, from an endpoint on the direct
// path to a plain-HTTP client on the connection loop, is relayed by
// splice(2): net.TCPConn's ReadFrom moves it from the endpoint's socket
// to the client's through a pipe, and its bytes never enter the process.
// Copying it through a buffer costs two copies of every byte, which for
// a 1 MiB body were most of the proxy's CPU. What the endpoint's reader
// already holds goes first, with the response head, in one write.
//
// Bodies of unknown length (chunked, streamed) keep copyBody, which
// frames and flushes them; so does TLS, whose records the process must
// make. A splice costs a few system calls and a pipe from a pool, which
// a small body does not repay.

// spliceMin is the least a body, less what the endpoint's reader holds,
// must be to be spliced.
const spliceMin = 16 << 10

// A body is spliced in one ReadFrom, which moves up to a megabyte per
// splice. Smaller pieces, each with the send and read timeouts armed
// whole before it, would bound every splice: in 64 KiB pieces a 1 MiB
// body takes 40 splices where one ReadFrom takes 14, and the client,
// handed it in smaller pieces, carries 0.7x the MB/s (bench/ingress).
// The timeouts are kept per operation by a watch instead (spliceWatch).

// spliceBody sends the body of resp, read from c, to the client of w by
// splice(2) where that pays and can be done, and says whether it did:
// when not, nothing was sent, and the body is for copyBody. An error is
// the body's, read or write, and the client's response is broken. A body
// sent whole has resp.Body replaced with http.NoBody, as its reader does
// not know the bytes went, and c may carry another request.
func spliceBody(w http.ResponseWriter, resp *http.Response, c *backendConn) (bool, error) {
	rec, hr, src, dst := spliceEnds(w, resp, c)
	if dst == nil {
		return false, nil
	}
	buffered := c.br.Buffered()
	rest := resp.ContentLength - int64(buffered)
	// The head sniffs a missing Content-Type from the body's first 512
	// bytes, which must then be at hand.
	if rest < spliceMin || len(resp.Header["Content-Type"]) == 0 && buffered < 512 {
		return false, nil
	}
	if buffered > 0 {
		b, _ := c.br.Peek(buffered)
		if _, err := rec.Write(b); err != nil {
			return true, err
		}
		c.br.Discard(buffered)
	}
	if err := hr.unbuffered(rest); err != nil {
		return true, err
	}
	st, _ := hr.client.(*sendTimeoutConn)
	if st != nil {
		st.armWrite()
	}
	c.armRead()
	watch := watchSplice(st, c, src, dst)
	lr := &io.LimitedReader{R: src, N: rest}
	n, err := dst.ReadFrom(lr)
	watch.stop()
	rec.bytes += n
	switch {
	case err != nil:
		return true, fmt.Errorf("splice the response body: %w", err)
	case lr.N > 0:
		// The endpoint closed the connection before the end.
		return true, fmt.Errorf("splice the response body: %w", io.ErrUnexpectedEOF)
	}
	resp.Body = http.NoBody
	return true, nil
}

// spliceWatch keeps the timeouts of a body being spliced per operation,
// as copyBody's are per read and write: a side is cut when it has moved
// nothing for its timeout, not when the whole body takes longer. Every
// quarter of the shorter timeout it reads how much the client has
// acknowledged and the endpoint has sent (tcpProgress) and, for a side
// that moved, sets its deadline a whole timeout on. The endpoint's is
// moved on when the client moved too: its bytes then wait in the proxy
// for the client, and it is not the endpoint that is slow.
type spliceWatch struct {
	mu     sync.Mutex
	done   bool
	timer  *time.Timer
	period time.Duration

	st                 *sendTimeoutConn
	endpoint           *backendConn
	client, server     *net.TCPConn
	acked, received    uint64
	clientOK, serverOK bool
}

// watchSplice starts the watch of a body spliced from src, c's
// connection, to dst, the client's (st when it has a send timeout). It
// is nil when neither side has a timeout.
func watchSplice(st *sendTimeoutConn, c *backendConn, src, dst *net.TCPConn) *spliceWatch {
	period := c.read
	if st != nil && st.timeout > 0 && (period <= 0 || st.timeout < period) {
		period = st.timeout
	}
	if period <= 0 {
		return nil
	}
	w := &spliceWatch{period: period / 4, st: st, endpoint: c, client: dst, server: src}
	w.acked, _, w.clientOK = tcpProgress(dst)
	_, w.received, w.serverOK = tcpProgress(src)
	w.timer = time.AfterFunc(w.period, w.check)
	return w
}

func (w *spliceWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	acked, _, _ := tcpProgress(w.client)
	_, received, _ := tcpProgress(w.server)
	// A side whose progress cannot be read is taken to have moved.
	clientMoved := !w.clientOK || acked != w.acked
	if clientMoved && w.st != nil {
		w.st.armWrite()
	}
	if clientMoved || !w.serverOK || received != w.received {
		w.endpoint.armRead()
	}
	w.acked, w.received = acked, received
	w.timer.Reset(w.period)
}

// stop ends the watch; the deadlines it set stay until the next
// operation sets its own.
func (w *spliceWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
}

// spliceEnds are the ends a body may be spliced between: the client's
// response and its TCP connection, and the endpoint's; dst is nil when
// there are none: w is not the loop's response, or either connection is
// not plain TCP, or the body's length is unknown or small, or it is not
// the whole response (HEAD).
func spliceEnds(w http.ResponseWriter, resp *http.Response, c *backendConn) (rec *recorder, hr *h1Response, src, dst *net.TCPConn) {
	if runtime.GOOS != "linux" || c == nil || resp.ContentLength < spliceMin || resp.Body == http.NoBody {
		return nil, nil, nil, nil
	}
	rec, ok := w.(*recorder)
	if !ok {
		return nil, nil, nil, nil
	}
	hr, ok = rec.ResponseWriter.(*h1Response)
	if !ok || hr.noBody || hr.length != resp.ContentLength || hr.written != 0 {
		return nil, nil, nil, nil
	}
	if src, ok = c.conn.(*net.TCPConn); !ok {
		return nil, nil, nil, nil
	}
	switch conn := hr.client.(type) {
	case *net.TCPConn:
		dst = conn
	case *sendTimeoutConn:
		dst, _ = conn.Conn.(*net.TCPConn)
	}
	return rec, hr, src, dst
}
