package ingress

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"portal.dev/portal/ingress/route"
)

// Routes is the routing state the handler consults for each request; a
// *route.Table is one.
type Routes interface {
	Route(host, path string, overTLS bool) route.Match
	Certificate(serverName string) *tls.Certificate
}

// Handler routes requests by the current Routes and proxies them to the
// endpoints of the matched backend. One Handler serves every listener.
type Handler struct {
	routes    func() Routes
	opts      Options
	metrics   *Metrics
	balancer  *balancer
	transport *transport
	proxy     *httputil.ReverseProxy
	// accessLog is nil with --access-log=false.
	accessLog *accessLog
}

// NewHandler returns a handler routing by what routes returns at each
// request, with o's timeouts and ports, counting into m.
func NewHandler(routes func() Routes, o Options, m *Metrics) *Handler {
	h := &Handler{
		routes:   routes,
		opts:     o,
		metrics:  m,
		balancer: &balancer{},
	}
	if o.AccessLog {
		h.accessLog = &accessLog{w: os.Stdout}
	}
	h.transport = newTransport(h.balancer, o.ConnectTimeout)
	h.transport.onDialError = m.upstreamConnectError
	h.proxy = &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { rewrite(pr, o.TrustForwardedHeaders) },
		Transport:    h.transport,
		ErrorHandler: proxyError,
		BufferPool:   bufferPool{},
		// proxyError reports every error; the default logger would print
		// each one again.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return h
}

// sweepInterval is how often the balancer forgets endpoints that are
// neither busy nor recently ejected.
const sweepInterval = 10 * time.Minute

// sweep runs the balancer's sweep and closes the connections to
// endpoints idle too long until ctx ends, then closes every idle one.
func (h *Handler) sweep(ctx context.Context) error {
	balancer := time.NewTicker(sweepInterval)
	defer balancer.Stop()
	conns := time.NewTicker(idleConnTimeout / 2)
	defer conns.Stop()
	defer h.closeIdle()
	for {
		select {
		case now := <-conns.C:
			h.balancer.closeIdle(now.Add(-idleConnTimeout))
		case now := <-balancer.C:
			h.balancer.sweep(now)
		case <-ctx.Done():
			return nil
		}
	}
}

// closeIdle closes every idle connection to endpoints.
func (h *Handler) closeIdle() {
	h.transport.closeIdle()
	h.balancer.closeIdle(time.Now().Add(time.Hour))
}

// listenerHandler is the Handler of one listener: overTLS tells
// requests that came over TLS, port is the listener's own
// (X-Forwarded-Port).
type listenerHandler struct {
	*Handler
	overTLS bool
	port    string
}

// request is what one request carries through the proxy, in its context
// under requestKey.
type request struct {
	attempt
	// start is when the request arrived.
	start time.Time
	// id is the client's X-Request-ID, or the one made for the request
	// once a string of it was needed; made holds a made one in madeID.
	id      string
	madeID  [32]byte
	made    bool
	port    string
	overTLS bool
	// body is the client's request body, when there is one.
	body *clientBody
	// w is the response to the client and out the request to the
	// endpoint on the direct path; fields, as one allocation per request
	// is cheaper than three.
	w   recorder
	out upstreamRequest
	// fwd outlives the request: the loop's next request on the
	// connection finds its forwarded fields there.
	fwd forwardedLines
}

// requestID is the request's X-Request-ID.
func (r *request) requestID() string {
	if r.id == "" && r.made {
		r.id = string(r.madeID[:])
	}
	return r.id
}

// appendID appends the request's X-Request-ID to b, without making a
// string of a made one.
func (r *request) appendID(b []byte) []byte {
	if r.id == "" && r.made {
		return append(b, r.madeID[:]...)
	}
	return append(b, r.id...)
}

type requestKey struct{}

func (l *listenerHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	host := hostname(r.Host)
	l.serveMatch(w, r, new(request), host, l.routes().Route(host, r.URL.Path, l.overTLS), start)
}

// serveMatch answers r, for host, which arrived at start and was routed
// to m. req is r's state in the proxy, overwritten: the loop's connection
// lends the same one to each of its requests, as nothing keeps it past
// its request on the direct path, the only one the loop takes. r's
// context is the request's only off the loop: rw.context(r) is, on and
// off it.
func (l *listenerHandler) serveMatch(w http.ResponseWriter, r *http.Request, req *request, host string, m route.Match, start time.Time) {
	// The field's canonical name: Header.Get would make it anew, an
	// allocation, from the usual spelling for each request.
	fwd := req.fwd
	*req = request{start: start, port: l.port, overTLS: l.overTLS, fwd: fwd}
	if id := r.Header["X-Request-Id"]; len(id) > 0 {
		req.id = id[0]
	}
	req.w.ResponseWriter = w
	rw := &req.w
	if req.id == "" {
		putRequestID(&req.madeID)
		req.made = true
	}
	// Deferred, as a request whose response fails midway ends in a panic
	// (http.ErrAbortHandler from ReverseProxy, which the server expects).
	defer l.record(r, m, rw, req, start)
	switch {
	case m.Backend == nil:
		plain(rw, http.StatusNotFound, "no Ingress rule matches this host and path")
	case m.RedirectHTTPS && !l.overTLS:
		http.Redirect(rw, r, l.httpsURL(r, host), http.StatusPermanentRedirect)
	case m.Backend.Unavailable != "":
		plain(rw, http.StatusServiceUnavailable, m.Backend.Unavailable)
	case len(usable(m.Backend.Endpoints())) == 0:
		plain(rw, http.StatusServiceUnavailable, "Service "+m.Backend.Service.String()+" has no ready endpoint")
	default:
		req.attempt = attempt{backend: m.Backend,
			connect: l.opts.ConnectTimeout, read: l.opts.ReadTimeout, send: l.opts.SendTimeout}
		if o := m.Options; o != nil {
			req.connect = or(o.ConnectTimeout, req.connect)
			req.read = or(o.ReadTimeout, req.read)
			req.send = or(o.SendTimeout, req.send)
		}
		probe(r)
		if takesDirectPath(r, m.Backend) {
			l.serveDirect(rw, r, req)
			return
		}
		out := r.WithContext(context.WithValue(rw.context(r), requestKey{}, req))
		if r.Body != nil && r.Body != http.NoBody {
			req.body = &clientBody{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: l.opts.ClientBodyTimeout}
			out.Body = req.body
		}
		l.proxy.ServeHTTP(rw, out)
	}
}

// record counts a finished request in the metrics and the access log.
func (l *listenerHandler) record(r *http.Request, m route.Match, rw *recorder, req *request, start time.Time) {
	var last *lastSeries
	if c := rw.loopConn(); c != nil {
		last = &c.lastSeries
	}
	// The direct path's last reading of the clock, as it let go of the
	// endpoint, ends the request when there is one: a few microseconds
	// short of a reading here, which is one fewer per request.
	took := req.ended.Sub(start)
	if req.ended.IsZero() {
		took = time.Since(start)
	}
	l.metrics.request(m, r.Method, rw.status(), took, last)
	if l.accessLog != nil {
		l.accessLog.write(logLine{r: r, start: start, took: took, status: rw.status(), bytes: rw.bytes, match: m, req: req})
	}
}

// clockAfter is a reading of the clock taken after t, which must have
// come from time.Now: t moved on by the monotonic clock's time since.
// That is one reading of a clock where time.Now takes two, the wall
// clock's and the monotonic one's (on a VM's kvm-clock, over 50 ns
// each). Its wall time is t's plus that, blind to steps of the wall
// clock, which none of its readers want to see: they measure how long
// something took or has been idle, or the time left to an ejection.
func clockAfter(t time.Time) time.Time { return t.Add(time.Since(t)) }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// httpsURL is where a plain-HTTP request to a TLS host is sent: the same
// host, path and query over HTTPS, on --https-port when that is not 443.
func (l *listenerHandler) httpsURL(r *http.Request, host string) string {
	if l.opts.HTTPSPort != 443 {
		host = net.JoinHostPort(host, strconv.Itoa(l.opts.HTTPSPort))
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return "https://" + host + r.URL.RequestURI()
}

// hostname is the host of a Host header without its port, lower-cased
// and without a trailing dot, as Ingress hosts are written.
func hostname(hostport string) string {
	host := hostport
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[1:i]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	for i := 0; i < len(host); i++ {
		if 'A' <= host[i] && host[i] <= 'Z' {
			return strings.ToLower(host)
		}
	}
	return host
}

// rewrite makes the request to the endpoint: the client's Host kept,
// X-Forwarded-For/-Proto/-Host/-Port and X-Real-IP set from the client's
// connection as ingress-nginx sets them, X-Request-ID the client's or a
// new one. A client's own X-Forwarded headers are dropped, as any client
// can forge them, unless trust is set (--trust-forwarded-headers, for a
// controller behind a proxy that sets them): then they are kept and the
// client's address is appended to X-Forwarded-For. The transport fills
// in the endpoint's address.
func rewrite(pr *httputil.ProxyRequest, trust bool) {
	req := pr.In.Context().Value(requestKey{}).(*request)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = req.backend.Service.String()
	pr.Out.Host = pr.In.Host
	// ReverseProxy removed the X-Forwarded headers from Out before
	// calling rewrite; In has the client's.
	forwarded(pr.In, pr.Out.Header, req, trust)
}

// forwardedFields are the fields that tell the endpoint about the
// client, in the order of forwardedValues.
var forwardedFields = [...]string{"X-Forwarded-For", "X-Real-Ip", "X-Forwarded-Proto",
	"X-Forwarded-Host", "X-Forwarded-Port", "X-Request-Id"}

// forwarded sets the headers that tell the endpoint about the client in
// out, the request to the endpoint, from in, the client's request, as
// rewrite says.
func forwarded(in *http.Request, out http.Header, req *request, trust bool) {
	// One array holds every value: a header is set per request.
	values := forwardedValues(in, req, trust)
	vs := values[:]
	for i, name := range forwardedFields {
		if vs[i] == "" {
			delete(out, name)
		} else {
			out[name] = vs[i : i+1 : i+1]
		}
	}
}

// forwardedValues are the values of forwardedFields for in; an empty one
// is a field not sent.
func forwardedValues(in *http.Request, req *request, trust bool) [len(forwardedFields)]string {
	v := clientForwarded(in, req, trust)
	return [...]string{v[0], v[1], v[2], v[3], v[4], req.requestID()}
}

// clientForwarded are forwardedValues but the last, X-Request-Id.
func clientForwarded(in *http.Request, req *request, trust bool) [len(forwardedFields) - 1]string {
	ip, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		ip = ""
	}
	realIP := ip
	proto, host, port := "http", in.Host, req.port
	if req.overTLS {
		proto = "https"
	}
	xff := ip
	if trust {
		if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			xff = strings.Join(prior, ", ") + ", " + ip
			realIP = strings.TrimSpace(strings.Split(prior[0], ",")[0])
		}
		proto = firstOr(in.Header.Get("X-Forwarded-Proto"), proto)
		host = firstOr(in.Header.Get("X-Forwarded-Host"), host)
		port = firstOr(in.Header.Get("X-Forwarded-Port"), port)
	}
	return [...]string{xff, realIP, proto, host, port}
}

// firstOr returns v, or def when v is empty.
func firstOr(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// proxyError answers a request its endpoints did not: 503 when there was
// no endpoint to try, 504 when one timed out, 502 otherwise. A client
// that went away gets nothing, nor one that stalled its request body:
// the handler is aborted and the connection closed.
func proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if req, ok := r.Context().Value(requestKey{}).(*request); ok && req.body.stalled() {
		abortStalled(w)
	}
	answerError(w, r, r.Context(), err)
}

// answerError is proxyError's answer to r, whose context is ctx.
func answerError(w http.ResponseWriter, r *http.Request, ctx context.Context, err error) {
	if ctx.Err() != nil {
		// The connection is closed with no answer, as nginx closes it:
		// a made-up status (the server's 200 for a handler that wrote
		// nothing) would mislead a client or cache still reading.
		if rec, ok := w.(*recorder); ok {
			rec.code = 499 // nginx's "client closed request", for logs and metrics
		}
		panic(http.ErrAbortHandler)
	}
	var ne net.Error
	switch {
	case errors.Is(err, errNoEndpoint):
		plain(w, http.StatusServiceUnavailable, "no endpoint to send the request to")
	case errors.Is(err, errUpstreamTimeout), errors.As(err, &ne) && ne.Timeout():
		plain(w, http.StatusGatewayTimeout, "the endpoint did not answer in time")
	default:
		klog.V(2).InfoS("Endpoint failed", "host", r.Host, "path", r.URL.Path, "err", err)
		plain(w, http.StatusBadGateway, "the endpoint failed to answer")
	}
}

// plain writes a short text answer.
func plain(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, strconv.Itoa(code)+" "+http.StatusText(code)+": "+msg+"\n")
}

// putRequestID writes a new request ID in id, 32 hex digits, as nginx's
// $request_id: 128 random bits from math/rand/v2's generator, which Go's
// runtime seeds from the system for each thread. An ID tells requests
// apart in logs and traces and guards nothing, so it needs no more than
// that, at a fraction of crypto/rand's cost.
func putRequestID(id *[32]byte) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	hex.Encode(id[:], b[:])
}

// recorder notes the status and size of a response. Unwrap lets
// ReverseProxy flush and hijack (for upgrades) through it.
type recorder struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// requestEnd is the end of req, answered through r: told by the loop's
// connection when the loop serves it, which spares a registration on the
// request's context per request, else by the context.
func (r *recorder) requestEnd(req *http.Request) requestEnd {
	if c := r.loopConn(); c != nil {
		return c
	}
	return contextEnd{req.Context()}
}

// context is the context of req, answered through r: on the loop, its
// connection's, which req does not carry (a copy of each request for it
// would allocate as much as the request), else req's own.
func (r *recorder) context(req *http.Request) context.Context {
	if c := r.loopConn(); c != nil {
		return c.ctx
	}
	return req.Context()
}

// loopConn is the loop's connection the response goes out on, nil when
// net/http's server serves the request.
func (r *recorder) loopConn() *h1Conn {
	if w, ok := r.ResponseWriter.(*h1Response); ok {
		return w.conn
	}
	return nil
}

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// bufferPool lends ReverseProxy its copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
