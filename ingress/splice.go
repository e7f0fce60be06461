package ingress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
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

// spliceChunk is how much of a body one splice moves at most. The
// client's send timeout and the endpoint's read timeout are set again
// before each (each has its timeout whole), as copyBody sets them for
// each of its writes and reads.
const spliceChunk = 64 << 10

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
	lr := &io.LimitedReader{R: src}
	for rest > 0 {
		if st != nil {
			st.armWrite()
		}
		c.armRead()
		lr.N = min(rest, spliceChunk)
		n, err := dst.ReadFrom(lr)
		rest -= n
		rec.bytes += n
		switch {
		case err != nil:
			return true, fmt.Errorf("splice the response body: %w", err)
		case lr.N > 0:
			// The endpoint closed the connection before the end.
			return true, fmt.Errorf("splice the response body: %w", io.ErrUnexpectedEOF)
		}
	}
	resp.Body = http.NoBody
	return true, nil
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
