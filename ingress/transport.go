package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"

	"portal.dev/portal/ingress/route"
)

// Limits of the connections to endpoints.
const (
	// maxIdlePerEndpoint is how many idle connections are kept per
	// endpoint, as nginx's keepalive directive bounds its cache.
	maxIdlePerEndpoint = 1024
	// idleConnTimeout closes a connection idle that long: endpoints
	// (Go's net/http among them) close theirs after a while too, and a
	// connection is better closed here than found closed at next use.
	idleConnTimeout = 60 * time.Second
	// maxResponseHeaderBytes is the most response header an endpoint may
	// send; more is answered 502.
	maxResponseHeaderBytes = 64 << 10
	// h2cReadIdleTimeout is how long an h2c connection may be silent
	// before it is pinged, and h2cPingTimeout how long the ping may go
	// unanswered before the connection is closed: an endpoint gone
	// without closing its connections (its node lost) fails the requests
	// on it in seconds, not at the read timeout.
	h2cReadIdleTimeout = 10 * time.Second
	h2cPingTimeout     = 5 * time.Second
)

// maxTries is how many endpoints one request may be tried on when dials
// fail: a failed dial sent nothing, so any method may be retried.
const maxTries = 3

// errNoEndpoint is the answer when a backend has no endpoint to try.
var errNoEndpoint = errors.New("no endpoint")

// errUpstreamTimeout cancels a request whose endpoint was silent for the
// read or send timeout; the client gets 504.
var errUpstreamTimeout = errors.New("upstream timed out")

// dialError marks an error of the dial to an endpoint: nothing of the
// request was sent.
type dialError struct {
	addr string
	err  error
}

func (e *dialError) Error() string { return "dial " + e.addr + ": " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// attempt is what the transport needs of a request (the handler's
// request, in its context): which backend, and the timeouts that apply.
type attempt struct {
	backend *route.Backend
	connect time.Duration
	read    time.Duration
	send    time.Duration
	// upstream is the address that answered, for the access log.
	upstream string
	// ended is when the direct path let go of the endpoint that
	// answered, zero before and on the other paths.
	ended time.Time
}

// attemptOf returns the attempt in ctx, or nil.
func attemptOf(ctx context.Context) *attempt {
	if r, ok := ctx.Value(requestKey{}).(*request); ok {
		return &r.attempt
	}
	return nil
}

// transport sends a request to an endpoint of its backend, over HTTP/1.1
// or h2c, trying other endpoints when a dial fails.
type transport struct {
	h1       *http.Transport
	h2c      *http2.Transport
	balancer *balancer
	// onDialError counts a failed dial of a backend's endpoint.
	onDialError func(*route.Backend)
	// defaultConnect is the connect timeout of a request that has none.
	defaultConnect time.Duration
}

// dial connects to an endpoint within timeout; its error is a
// *dialError.
func dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &dialError{addr: addr, err: err}
	}
	return c, nil
}

// dialDirect connects to an endpoint for the direct path within timeout,
// or defaultConnect when that is 0.
func (t *transport) dialDirect(ctx context.Context, addr string, timeout time.Duration) (*backendConn, error) {
	c, err := dial(ctx, addr, or(timeout, t.defaultConnect))
	if err != nil {
		return nil, err
	}
	return newBackendConn(c), nil
}

func newTransport(b *balancer, defaultConnect time.Duration) *transport {
	dialContext := func(ctx context.Context, _, addr string) (net.Conn, error) {
		timeout := defaultConnect
		if a := attemptOf(ctx); a != nil && a.connect > 0 {
			timeout = a.connect
		}
		return dial(ctx, addr, timeout)
	}
	return &transport{
		h1: &http.Transport{
			DialContext: dialContext,
			// Every endpoint is one host to the pool; a busy proxy keeps
			// many connections to each, as nginx's keepalive does.
			MaxIdleConns:           0,
			MaxIdleConnsPerHost:    maxIdlePerEndpoint,
			IdleConnTimeout:        idleConnTimeout,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
			// The client's own compression passes through untouched.
			DisableCompression: true,
			ForceAttemptHTTP2:  false,
		},
		h2c: &http2.Transport{
			AllowHTTP: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return dialContext(ctx, network, addr)
			},
			DisableCompression: true,
			ReadIdleTimeout:    h2cReadIdleTimeout,
			PingTimeout:        h2cPingTimeout,
		},
		balancer:       b,
		defaultConnect: defaultConnect,
	}
}

// closeIdle closes every idle connection to endpoints.
func (t *transport) closeIdle() {
	t.h1.CloseIdleConnections()
	t.h2c.CloseIdleConnections()
}

// RoundTrip picks an endpoint, sends the request there and retries on
// another endpoint while dials fail, ejecting those that refused.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	a := attemptOf(req.Context())
	if a == nil {
		return nil, errors.New("request without a backend")
	}
	rt := http.RoundTripper(t.h1)
	if a.backend.Protocol == route.H2C {
		rt = t.h2c
	}
	body := &retryBody{body: req.Body}
	if req.Body == nil || req.Body == http.NoBody {
		body = nil
	}

	ctx, cancel := context.WithCancelCause(req.Context())
	timer := newIdleTimer(cancel, a)
	var tried []*endpoint
	var lastErr error = errNoEndpoint
	for len(tried) < maxTries {
		e := t.balancer.pick(usable(a.backend.Endpoints()), tried, t.balancer.time())
		if e == nil {
			break
		}
		tried = append(tried, e)
		out := outgoing(req, ctx, e.addr, body, timer)
		e.inFlight.Add(1)
		resp, err := rt.RoundTrip(out)
		if err == nil && !upgradeAsked(req, resp) {
			// ReverseProxy would refuse it too, but leave the endpoint's
			// connection open and the request counted in flight.
			resp.Body.Close()
			err = fmt.Errorf("endpoint %s switched to protocol %q, which the client did not ask for",
				e.addr, resp.Header.Get("Upgrade"))
		}
		if err == nil {
			a.upstream = e.addr
			timer.responding(resp)
			resp.Body = &trackedBody{ReadCloser: resp.Body, done: func() {
				e.inFlight.Add(-1)
				timer.stop()
				cancel(nil)
			}}
			return resp, nil
		}
		e.inFlight.Add(-1)
		lastErr = err
		var de *dialError
		if !errors.As(err, &de) || (body != nil && body.read.Load()) || ctx.Err() != nil {
			break
		}
		e.eject(t.balancer.time())
		if t.onDialError != nil {
			t.onDialError(a.backend)
		}
	}
	timer.stop()
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, errUpstreamTimeout) {
		lastErr = cause
	}
	cancel(nil)
	// After a response the body is the transport's: it may stream on
	// after the response began (gRPC's client streams), and ReverseProxy
	// closes it when the exchange ends.
	body.close()
	return nil, lastErr
}

// upgradeAsked says whether resp, when a 101 Switching Protocols, switches
// to the protocol req asked for.
func upgradeAsked(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return true
	}
	want := req.Header.Get("Upgrade")
	return want != "" && httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade") &&
		strings.EqualFold(want, resp.Header.Get("Upgrade"))
}

// outgoing is req as sent to one endpoint: a shallow copy, as a
// RoundTripper must not change the request it is given.
func outgoing(req *http.Request, ctx context.Context, addr string, body *retryBody, timer *idleTimer) *http.Request {
	out := req.WithContext(ctx)
	u := *req.URL
	u.Host = addr
	out.URL = &u
	if body != nil {
		body.timer = timer
		out.Body = body
	}
	return out
}

// retryBody is a request body that survives a failed attempt: the
// transport closes the body it was given even when the dial failed, and
// then nothing was read, so the next endpoint can be given it again.
type retryBody struct {
	body  io.ReadCloser
	read  atomic.Bool // the transport reads in its own goroutine
	timer *idleTimer
}

func (b *retryBody) Read(p []byte) (int, error) {
	b.timer.clientReading()
	n, err := b.body.Read(p)
	if n > 0 {
		b.read.Store(true)
	}
	b.timer.clientRead(n > 0)
	return n, err
}

// Close is left to RoundTrip, which knows when no attempt is left, and
// to ReverseProxy, which closes the request body when the exchange ends.
func (b *retryBody) Close() error { return nil }

func (b *retryBody) close() {
	if b != nil {
		b.body.Close()
	}
}

// trackedBody calls done once when the response body is closed.
type trackedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// Write makes an upgraded connection (101 Switching Protocols) writable
// through the wrapper, as ReverseProxy needs an io.ReadWriteCloser.
func (b *trackedBody) Write(p []byte) (int, error) {
	if w, ok := b.ReadCloser.(io.Writer); ok {
		return w.Write(p)
	}
	return 0, errors.New("response body is not writable")
}
