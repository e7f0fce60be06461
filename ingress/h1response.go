package ingress

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// chunkAfter is how much of a body of unannounced length is held back
// before the response goes out chunked; a body that ends within it goes
// out with its Content-Length, as net/http's server does.
const chunkAfter = 2 << 10

// h1Response is the http.ResponseWriter of a request served on the
// connection loop (h1Conn). It writes HTTP/1.1 as net/http's server
// does for the answers the loop gives: the head once the status is set
// and its length known (the handler's Content-Length, or the whole body
// when it ends within chunkAfter), else chunked; no body for HEAD, 1xx,
// 204 and 304; a Date and a sniffed Content-Type when the handler set
// none; trailers after a chunked body; 1xx heads written at once.
// It is reused for each request of its connection.
type h1Response struct {
	bw *bufio.Writer
	// conn is the connection the response goes out on, which tells the
	// request's end.
	conn *h1Conn
	req  *http.Request
	h    http.Header
	// closing says the connection ends after this response: the client
	// or the server asked for it.
	closing bool
	// client is the client's connection bw writes to, for a body sent
	// past bw (unbuffered).
	client net.Conn

	code       int   // the final status, 0 until set
	length     int64 // the announced Content-Length, -1 for none
	written    int64 // body bytes accepted
	headSent   bool
	chunked    bool
	noBody     bool
	pending    []byte // body held back until its length is known
	writeErr   error  // the first write to the client that failed
	trailerSet bool   // the head announced trailers
	// endpoint says h is an endpoint's header (adopt): its hop-by-hop
	// fields are left out as it is written, and its Connection field
	// is not the handler's.
	endpoint bool
}

// reset readies w for the request r.
func (w *h1Response) reset(r *http.Request, closing bool) {
	if w.h == nil {
		w.h = make(http.Header)
	} else {
		clear(w.h)
	}
	*w = h1Response{bw: w.bw, conn: w.conn, client: w.client, req: r, h: w.h, closing: closing, length: -1,
		pending: w.pending[:0]}
}

// Header is the response's header, sent with the first write.
func (w *h1Response) Header() http.Header { return w.h }

// adopt makes h, an endpoint's response header, the response's when no
// field is set and nothing written yet, and says whether it did. The
// fields h's Connection field names are deleted, and so is a Trailer
// field, which the writer would read as the handler's (respond sets
// the one it sends); the other hop-by-hop fields stay in h, left out as
// it is written. The next reset clears h for the next request.
func (w *h1Response) adopt(h http.Header) bool {
	if w.code != 0 || len(w.h) > 0 || h == nil {
		return false
	}
	removeConnectionNamed(h)
	delete(h, "Trailer")
	w.h, w.endpoint = h, true
	return true
}

// WriteHeader sets the status; a 1xx head is written and flushed at
// once, as net/http's server does.
func (w *h1Response) WriteHeader(code int) {
	if w.code != 0 {
		return
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.code = code
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent ||
		code == http.StatusNotModified || code < 200
	if cl := w.h["Content-Length"]; len(cl) > 0 && cl[0] != "" {
		if v, err := strconv.ParseInt(cl[0], 10, 64); err == nil && v >= 0 {
			w.length = v
		} else {
			delete(w.h, "Content-Length")
		}
	}
}

func (w *h1Response) writeInformational(code int) {
	b := appendStatusLine(w.bw.AvailableBuffer(), code)
	b = appendHeader(b, w.h, noBodyHeaders, w.endpoint)
	b = append(b, "\r\n"...)
	w.write(b)
	w.flush()
}

// Write sends p as part of the body.
func (w *h1Response) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.writeErr != nil {
		return 0, w.writeErr
	}
	if w.noBody {
		if w.req.Method == http.MethodHead {
			// Counted for the Content-Length of the answer to HEAD.
			w.written += int64(len(p))
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	switch {
	case w.headSent:
	case w.length >= 0:
		w.sendHead(p)
	case len(w.pending)+len(p) <= chunkAfter:
		w.pending = append(w.pending, p...)
		return len(p), nil
	default:
		w.startChunked()
	}
	w.writeBody(p)
	return len(p), w.writeErr
}

// Flush sends what is held back, the head first; a body of unknown
// length is chunked from then on.
func (w *h1Response) Flush() { w.FlushError() }

// FlushError is Flush, telling of a failed write.
func (w *h1Response) FlushError() error {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		if w.length < 0 && !w.noBody {
			w.startChunked()
		} else {
			w.sendHead(w.pending)
			w.writeBody(w.pending)
			w.pending = w.pending[:0]
		}
	}
	w.flush()
	return w.writeErr
}

// unbuffered sends the head and the body so far, and counts the n bytes
// that end the body as written: the caller writes them itself, straight
// to client, and must end the connection when it cannot.
func (w *h1Response) unbuffered(n int64) error {
	if err := w.FlushError(); err != nil {
		return err
	}
	w.written += n
	return nil
}

// startChunked sends the head of a chunked body and the part held back.
func (w *h1Response) startChunked() {
	w.chunked = true
	w.sendHead(w.pending)
	if len(w.pending) > 0 {
		w.writeBody(w.pending)
		w.pending = w.pending[:0]
	}
}

// finish ends the response once the handler returned, and says whether
// the connection may carry another request.
func (w *h1Response) finish() bool {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		// A body that ended held back gets its length, as net/http's
		// server gives it; for HEAD, the length of what the handler
		// wrote, unless it wrote nothing.
		n := int64(len(w.pending))
		if w.req.Method == http.MethodHead {
			n = w.written
		}
		if w.length < 0 && w.bodyAllowed() && !w.hasTrailers() && (w.req.Method != http.MethodHead || n > 0) {
			w.length = n
			w.h["Content-Length"] = []string{strconv.FormatInt(n, 10)}
		}
		if w.length < 0 && !w.noBody {
			w.startChunked()
		} else {
			w.sendHead(w.pending)
			w.writeBody(w.pending)
		}
	}
	if w.chunked {
		w.writeTrailers()
	}
	w.flush()
	// A body shorter than announced leaves the client waiting for the
	// rest: only closing the connection tells it.
	short := !w.noBody && w.length >= 0 && w.written != w.length
	return w.writeErr == nil && !w.closing && !short
}

// bodyAllowed says whether the status allows a body.
func (w *h1Response) bodyAllowed() bool {
	return w.code >= 200 && w.code != http.StatusNoContent && w.code != http.StatusNotModified
}

// hasTrailers says whether the handler announced or set trailers.
func (w *h1Response) hasTrailers() bool {
	if len(w.h["Trailer"]) > 0 {
		return true
	}
	for k := range w.h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// sendHead writes the status line and header; first is the body's start,
// for a Content-Type sniffed when the handler set none.
func (w *h1Response) sendHead(first []byte) {
	w.headSent = true
	h := w.h
	if v := h["Connection"]; !w.endpoint && len(v) > 0 && strings.EqualFold(v[0], "close") {
		w.closing = true
	}
	skip := noHeaders
	switch {
	case w.code == http.StatusNotModified:
		skip = notModifiedHeaders
	case w.code == http.StatusNoContent || w.code < 200:
		skip = noBodyHeaders
	}
	b := appendStatusLine(w.bw.AvailableBuffer(), w.code)
	b = appendHeader(b, h, skip, w.endpoint)
	if _, ok := h["Date"]; !ok {
		b = append(b, "Date: "...)
		b = time.Now().UTC().AppendFormat(b, http.TimeFormat)
		b = append(b, "\r\n"...)
	}
	if _, ok := h["Content-Type"]; !ok && !w.noBody && len(first) > 0 && h.Get("Content-Encoding") == "" {
		b = append(b, "Content-Type: "...)
		b = append(b, http.DetectContentType(first)...)
		b = append(b, "\r\n"...)
	}
	if w.chunked {
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.closing {
		if _, ok := h["Connection"]; !ok || w.endpoint {
			b = append(b, "Connection: close\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	w.write(b)
}

// writeBody writes p, as a chunk when the body is chunked.
func (w *h1Response) writeBody(p []byte) {
	if len(p) == 0 || w.noBody {
		return
	}
	if !w.chunked {
		w.write(p)
		return
	}
	b := strconv.AppendInt(w.bw.AvailableBuffer(), int64(len(p)), 16)
	b = append(b, "\r\n"...)
	w.write(b)
	w.write(p)
	w.write(crlf)
}

var crlf = []byte("\r\n")

// writeTrailers ends a chunked body with the trailers the handler set:
// those the head announced, and those named with http.TrailerPrefix.
func (w *h1Response) writeTrailers() {
	b := append(w.bw.AvailableBuffer(), "0\r\n"...)
	for _, v := range w.h["Trailer"] {
		for name := range strings.SplitSeq(v, ",") {
			name = http.CanonicalHeaderKey(strings.TrimSpace(name))
			b = appendField(b, name, w.h[name])
		}
	}
	for k, vv := range w.h {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			b = appendField(b, http.CanonicalHeaderKey(name), vv)
		}
	}
	b = append(b, "\r\n"...)
	w.write(b)
}

func (w *h1Response) write(p []byte) {
	if w.writeErr == nil {
		_, w.writeErr = w.bw.Write(p)
	}
}

func (w *h1Response) flush() {
	if w.writeErr == nil {
		w.writeErr = w.bw.Flush()
	}
}

// The fields not sent with a status: those of a body and of the
// connection's framing, which the response writes itself. A switch
// tells them, where a map would hash each field name of each response.
type headerSkip uint8

const (
	// noHeaders leaves out Transfer-Encoding only.
	noHeaders headerSkip = 0
	// noBodyHeaders leaves out Content-Length too.
	noBodyHeaders headerSkip = 1
	// notModifiedHeaders leaves out Content-Type too.
	notModifiedHeaders headerSkip = 2
)

func (s headerSkip) skips(name string) bool {
	switch name {
	case "Transfer-Encoding":
		return true
	case "Content-Length":
		return s >= noBodyHeaders
	case "Content-Type":
		return s >= notModifiedHeaders
	}
	return false
}

func appendStatusLine(b []byte, code int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		return append(append(b, text...), "\r\n"...)
	}
	b = append(b, "status code "...)
	b = strconv.AppendInt(b, int64(code), 10)
	return append(b, "\r\n"...)
}

// appendHeader appends the fields of h but those in skip, those named
// with http.TrailerPrefix, which go in the trailer, and with hopByHop the
// hop-by-hop ones but Trailer: an endpoint's header has none left by
// adopt, only the handler's announcement.
func appendHeader(b []byte, h http.Header, skip headerSkip, hopByHop bool) []byte {
	for k, vv := range h {
		if skip.skips(k) || strings.HasPrefix(k, http.TrailerPrefix) || hopByHop && k != "Trailer" && isHopByHop(k) {
			continue
		}
		b = appendField(b, k, vv)
	}
	return b
}

// appendField appends name's values as lines, each line break in a
// value made a space, as net/http writes them, so that no value can end
// the head.
func appendField(b []byte, name string, values []string) []byte {
	for _, v := range values {
		b = append(b, name...)
		b = append(b, ": "...)
		start := len(b)
		b = append(b, strings.TrimSpace(v)...)
		// Values seldom have a line break (the parsers refuse them): a
		// search for one is quicker than a look at each byte.
		if value := b[start:]; bytes.IndexByte(value, '\r') >= 0 || bytes.IndexByte(value, '\n') >= 0 {
			for i, c := range value {
				if c == '\r' || c == '\n' {
					value[i] = ' '
				}
			}
		}
		b = append(b, "\r\n"...)
	}
	return b
}
