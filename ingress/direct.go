package ingress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"portal.dev/portal/ingress/route"
)

// The direct path: a request without a body, to an HTTP/1.1 endpoint, is
// sent from the handler's own goroutine, written with Request.Write on a
// pooled connection and answered from http.ReadResponse, then copied to
// the client. http.Transport and ReverseProxy hand every request to two
// goroutines of the endpoint's connection and back, clone it and wrap
// its body several times; for the small requests that make most of an
// Ingress's traffic that costs more CPU than the proxying itself.
//
// What http.Transport and ReverseProxy guarantee holds here too: the
// response head is bounded (maxResponseHeaderBytes) and so is the count
// of 1xx answers, which are passed on to the client; a 101 nobody asked
// for is refused; hop-by-hop headers go neither way; a request is retried
// on a new connection when a reused one turns out closed by the endpoint
// before answering (any method when nothing of it could be sent, else
// only those safe to repeat; never after a timeout), and on another
// endpoint when a dial fails; a connection goes back to the pool only
// when its response was read to the end, as announced, with nothing
// after it. Requests with a body, upgrades and h2c endpoints take
// http.Transport's path: a body may stream on while the response comes
// (gRPC), which needs a second goroutine anyway.

// max1xxResponses is how many informational answers may precede the
// final one, as http.Transport allows.
const max1xxResponses = 5

// errInvalidHost is a client's Host that cannot be sent on.
var errInvalidHost = errors.New("invalid Host header")

// errTooMany1xx is an endpoint's answer that never ends in a final one.
var errTooMany1xx = errors.New("too many 1xx informational responses")

// takesDirectPath says whether r to b can take the direct path.
func takesDirectPath(r *http.Request, b *route.Backend) bool {
	return b.Protocol != route.H2C && (r.Body == nil || r.Body == http.NoBody) &&
		r.Method != http.MethodConnect && len(r.Header["Upgrade"]) == 0
}

// serveDirect answers r from an endpoint of req's backend over the
// direct path.
func (l *listenerHandler) serveDirect(w *recorder, r *http.Request, req *request) {
	if !httpguts.ValidHostHeader(r.Host) {
		// Request.Write refuses such a Host, as the head would break.
		answerError(w, r, w.context(r), errInvalidHost)
		return
	}
	out := l.outgoing(r, req)
	a := &req.attempt
	var tried []*endpoint
	var lastErr error = errNoEndpoint
	for len(tried) < maxTries {
		// One reading of the clock serves the pick and the pool.
		now := l.balancer.after(req.start)
		e := l.balancer.pick(usable(a.backend.Endpoints()), tried, now)
		if e == nil {
			break
		}
		tried = append(tried, e)
		err := l.exchange(w, r, out, e, a, now)
		if err == nil {
			return
		}
		lastErr = err
		var de *dialError
		if !errors.As(err, &de) || w.context(r).Err() != nil {
			break
		}
		e.eject(l.balancer.after(req.start))
		l.metrics.upstreamConnectError(a.backend)
	}
	answerError(w, r, w.context(r), lastErr)
}

// exchange sends out to e and copies the answer to w. An error is
// returned only while nothing was written to w; a failure after that
// aborts the client's response (http.ErrAbortHandler), as ReverseProxy
// does.
func (l *listenerHandler) exchange(w *recorder, r *http.Request, out *upstreamRequest, e *endpoint, a *attempt, now time.Time) error {
	e.inFlight.Add(1)
	defer e.inFlight.Add(-1)
	c, resp, err := l.roundTrip(w, r, out, e, a, now)
	if err != nil {
		return err
	}
	a.upstream = e.addr
	if err := respond(w, resp, c); err != nil {
		c.close()
		panic(http.ErrAbortHandler)
	}
	// One reading of the clock serves the pool and the request's
	// duration (record). Its readers only measure how long something
	// took or has been idle; none sets a deadline from it, where a late
	// reading would be needed.
	a.ended = l.balancer.after(now)
	if c.finish(resp) {
		e.putIdle(c, a.ended)
	}
	return nil
}

// roundTrip writes out on a connection to e, an idle one when there is
// one, and reads the response head. A reused connection the endpoint
// closed before answering is replaced by a new one when out can be sent
// again (nothing of it was written, or it is replayable); a timeout is
// never retried. A 408 on a reused connection is taken for the
// endpoint's idle timeout, and a replayable out is sent once more on a
// new connection. A dial that fails is a *dialError. now is the
// balancer's time as the request starts.
func (l *listenerHandler) roundTrip(w *recorder, r *http.Request, out *upstreamRequest, e *endpoint, a *attempt, now time.Time) (*backendConn, *http.Response, error) {
	fresh := false
	for {
		var c *backendConn
		if !fresh {
			c = e.getIdle(now)
		}
		reused := c != nil
		if reused && !c.usable(now, replayable(out)) {
			// http.Transport learns from the read it keeps posted of a
			// connection closed while idle, and of bytes sent on it then
			// (a 408, a stray response) that would be read as the answer.
			c.close()
			continue
		}
		if !reused {
			var err error
			if c, err = l.transport.dialDirect(w.context(r), e.addr, a.connect); err != nil {
				return nil, nil, err
			}
		}
		resp, err := c.roundTrip(w.requestEnd(r), out, a, w.informational)
		if err == nil && reused && resp.StatusCode == http.StatusRequestTimeout && replayable(out) {
			// The endpoint timed the connection out as the request came:
			// it did not take it (RFC 9110, section 15.5.9). Send it once
			// more, on a new connection.
			c.close()
			fresh = true
			continue
		}
		if err == nil {
			return c, resp, nil
		}
		c.close()
		// The next pooled connection is taken after this exchange.
		now = l.balancer.after(now)
		if !reused || c.answered || w.context(r).Err() != nil || !(c.unsent() || replayable(out) && closedByEndpoint(err)) {
			return nil, nil, err
		}
	}
}

// closedByEndpoint says whether err is how a read or write fails on a
// connection the endpoint has closed: EOF or a reset. A timeout is not:
// the endpoint may be working on the request, and sending it again would
// make the client wait the timeout once more, which http.Transport never
// does either.
func closedByEndpoint(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// informational passes a 1xx answer of the endpoint on to the client,
// without its hop-by-hop fields, as the final answer. h is the 1xx's own
// header, read for this call only.
func (r *recorder) informational(code int, h http.Header) {
	removeHopByHop(h)
	dst := r.Header()
	for k, vv := range h {
		dst[k] = vv
	}
	r.WriteHeader(code)
	// WriteHeader keeps the header of a 1xx for the final answer.
	clear(dst)
}

// replayable says whether out may be sent again after the endpoint may
// have seen it: methods that change nothing, or a request the client
// marked idempotent, as http.Transport decides.
func replayable(out *upstreamRequest) bool {
	switch out.r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return len(out.r.Header["Idempotency-Key"]) > 0 || len(out.r.Header["X-Idempotency-Key"]) > 0
}

// upstreamRequest is the request to the endpoint for the client's r: r's
// method, target and Host, its header without hop-by-hop fields nor the
// client's forwarded ones, and the forwarded fields of the proxy, as
// Request.Write would send them, but written straight into the
// connection's buffer (appendHead): copying the header into a new
// http.Request cost more than the rest of the request's way.
type upstreamRequest struct {
	r      *http.Request
	target string
	// req gives the forwarded fields, its ID among them, from the
	// client's fields when trust is set; without req, there is none.
	req   *request
	trust bool
	// dropped are the fields the client's Connection field names.
	dropped []string
}

// outgoing makes the request to the endpoint for r.
func (l *listenerHandler) outgoing(r *http.Request, req *request) *upstreamRequest {
	out := &req.out
	*out = upstreamRequest{r: r, req: req, trust: l.opts.TrustForwardedHeaders}
	u := r.URL
	if q := cleanQuery(u.RawQuery); q != u.RawQuery || u.Scheme != "" || u.Host != "" {
		u = &url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: q}
	}
	out.target = u.RequestURI()
	for _, v := range r.Header["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			name = textproto.TrimString(name)
			if name != "" && !strings.EqualFold(name, "keep-alive") && !strings.EqualFold(name, "close") {
				out.dropped = append(out.dropped, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	return out
}

// notForwarded says whether the client's field name is one the endpoint
// does not get as it came: hop-by-hop ones, those the proxy sets
// (forwardedFields), and those Request.Write writes itself. A switch
// tells it without hashing name, as a map would for each field of each
// request.
func notForwarded(name string) bool {
	switch name {
	case "Forwarded", "Host", "Content-Length", "User-Agent",
		"X-Forwarded-For", "X-Real-Ip", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-Port", "X-Request-Id":
		return true
	}
	return isHopByHop(name)
}

// forwardedLines are the lines of the forwarded fields of a connection's
// last request, X-Request-Id left out, and what they were made from: the
// next requests on the connection mostly have the same, as the client's
// address and the listener do not change, and the Host seldom does. The
// client's own fields, when trusted, make them anew for each request.
type forwardedLines struct {
	remote, host, port string
	overTLS, valid     bool
	b                  []byte
}

// append appends the forwarded fields' lines of in but X-Request-Id to
// b. With keep, they are kept for the next request: only the loop's
// connection has one, to which it lends the same request.
func (f *forwardedLines) append(b []byte, in *http.Request, req *request, trust, keep bool) []byte {
	if f.valid && !trust && f.remote == in.RemoteAddr && f.host == in.Host && f.port == req.port && f.overTLS == req.overTLS {
		return append(b, f.b...)
	}
	start := len(b)
	v := clientForwarded(in, req, trust)
	for i := range v {
		if v[i] != "" {
			b = appendField(b, forwardedFields[i], v[i:i+1])
		}
	}
	if keep && !trust {
		f.b = append(f.b[:0], b[start:]...)
		f.remote, f.host, f.port, f.overTLS, f.valid = in.RemoteAddr, in.Host, req.port, req.overTLS, true
	}
	return b
}

// appendHead appends the request's head to b.
func (o *upstreamRequest) appendHead(b []byte) []byte {
	r := o.r
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, o.target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.Host...)
	b = append(b, "\r\n"...)
	if ua := r.Header["User-Agent"]; len(ua) > 0 && ua[0] != "" {
		b = appendField(b, "User-Agent", ua[:1])
	}
	for k, vv := range r.Header {
		if !notForwarded(k) && !slices.Contains(o.dropped, k) {
			b = appendField(b, k, vv)
		}
	}
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		b = append(b, "Te: trailers\r\n"...)
	}
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		// As Request.Write: many servers expect a length with the
		// methods that usually have a body.
		b = append(b, "Content-Length: 0\r\n"...)
	}
	req := o.req
	if req == nil {
		return append(b, "\r\n"...)
	}
	b = req.fwd.append(b, r, req, o.trust, req.w.loopConn() != nil)
	switch {
	case req.id != "":
		b = appendField(b, "X-Request-Id", []string{req.id})
	case req.made:
		// Hex digits: no value to clean, nor a string to make.
		b = append(b, "X-Request-Id: "...)
		b = append(req.appendID(b), "\r\n"...)
	}
	return append(b, "\r\n"...)
}

// hopByHop are the fields of one connection, never forwarded (RFC 9110,
// section 7.6.1, and the older ones proxies still drop).
var hopByHop = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// isHopByHop says whether name is one of hopByHop. A switch tells it
// without hashing name, as a map or a delete per entry of hopByHop would.
func isHopByHop(name string) bool {
	switch name {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// removeHopByHop deletes the hop-by-hop fields of h, those its Connection
// field names included. h's value slices may be shared: only whole
// entries are deleted. An endpoint's head has a few fields, fewer than
// hopByHop: one look at each of them is cheaper than a delete of each
// of hopByHop.
func removeHopByHop(h http.Header) {
	removeConnectionNamed(h)
	for k := range h {
		if isHopByHop(k) {
			delete(h, k)
		}
	}
}

// removeConnectionNamed deletes the fields h's Connection field names.
func removeConnectionNamed(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			// keep-alive and close, the usual tokens, name no field
			// but hop-by-hop ones: spare their canonical forms.
			name = textproto.TrimString(name)
			if name != "" && !strings.EqualFold(name, "keep-alive") && !strings.EqualFold(name, "close") {
				delete(h, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
}

// cleanQuery is q unchanged unless it has parts Go's URL parser drops (a
// ';' separator, a broken escape): then only what it keeps, as
// ReverseProxy sends, so that the endpoint cannot read parameters the
// proxy did not see.
func cleanQuery(q string) string {
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			v, _ := url.ParseQuery(q)
			return v.Encode()
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				v, _ := url.ParseQuery(q)
				return v.Encode()
			}
		}
	}
	return q
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// respond copies resp, head, body and trailers, to w; an error is one of
// the body's, read or write. c is the connection resp is read from, for
// a large body spliced from it (spliceBody).
func respond(w http.ResponseWriter, resp *http.Response, c *backendConn) error {
	h := adoptHeader(w, resp.Header)
	announced := len(resp.Trailer)
	if announced > 0 {
		names := make([]string, 0, announced)
		for k := range resp.Trailer {
			names = append(names, k)
		}
		h["Trailer"] = []string{strings.Join(names, ", ")}
	}
	w.WriteHeader(resp.StatusCode)
	if spliced, err := spliceBody(w, resp, c); spliced {
		return err
	}
	if err := copyBody(w, resp.Body, resp.ContentLength < 0); err != nil {
		return err
	}
	if len(resp.Trailer) == 0 {
		return nil
	}
	// A flush makes the server chunk the body, the only way trailers go
	// over HTTP/1.1, where it would otherwise count a short body.
	http.NewResponseController(w).Flush()
	for k, vv := range resp.Trailer {
		if announced != len(resp.Trailer) {
			k = http.TrailerPrefix + k
		}
		h[k] = vv
	}
	return nil
}

// adoptHeader gives w the fields of h, an endpoint's response header,
// but the hop-by-hop ones, and returns w's header. The loop's response
// writer, with no field set yet, takes h itself, which nothing else holds
// once resp is read: a copy would cost a map write per field of each
// response. It leaves the hop-by-hop fields out as it writes h, which
// spares their deletes and a look at each field.
func adoptHeader(w http.ResponseWriter, h http.Header) http.Header {
	if r, ok := w.(*recorder); ok {
		if hw, ok := r.ResponseWriter.(*h1Response); ok && hw.adopt(h) {
			return h
		}
	}
	removeHopByHop(h)
	dst := w.Header()
	for k, vv := range h {
		dst[k] = vv
	}
	return dst
}

// copyBody copies body to w. A body of unknown length (a stream,
// chunked) is flushed to the client at each piece, as ReverseProxy does.
func copyBody(w http.ResponseWriter, body io.Reader, flush bool) error {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	var rc *http.ResponseController
	if flush {
		rc = http.NewResponseController(w)
	}
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if rc != nil {
				if ferr := rc.Flush(); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the response body: %w", err)
		}
	}
}
