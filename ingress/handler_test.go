package ingress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/ingress/route"
)

// echo is a backend that answers with its name and what it was sent.
func echo(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s %s host=%s xff=%s proto=%s xhost=%s port=%s realip=%s id=%s",
			name, r.Method, r.URL.RequestURI(), body, r.Host, r.Header.Get("X-Forwarded-For"),
			r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Forwarded-Port"),
			r.Header.Get("X-Real-IP"), r.Header.Get("X-Request-ID"))
	}))
	t.Cleanup(s.Close)
	return s
}

func addr(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRouting(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	tb.backend("bar.com", route.Match{}, addr(echo(t, "bar")))
	tb.backend("empty.com", route.Match{})
	tb.backend("resource.com", route.Match{Backend: &route.Backend{Unavailable: "backend is a resource (example.com/Bucket), which this controller does not serve"}})
	_, port, _ := strings.Cut(tb.http, ":")
	for _, tc := range []struct {
		name, host, path string
		header           map[string]string
		wantCode         int
		wantBody         string // a part of the body
	}{
		{name: "first host", host: "foo.com", path: "/a?x=1", wantCode: 200, wantBody: "foo GET /a?x=1"},
		{name: "second host", host: "bar.com", path: "/", wantCode: 200, wantBody: "bar GET /"},
		{name: "host with port and capitals", host: "BAR.com:" + port, path: "/", wantCode: 200, wantBody: "host=BAR.com:" + port},
		{name: "host preserved", host: "foo.com", path: "/", wantCode: 200, wantBody: "host=foo.com "},
		{name: "forwarded headers", host: "foo.com", path: "/", wantCode: 200,
			wantBody: "xff=127.0.0.1 proto=http xhost=foo.com port=" + port + " realip=127.0.0.1 id="},
		{name: "request id kept", host: "foo.com", path: "/", header: map[string]string{"X-Request-ID": "abc123"},
			wantCode: 200, wantBody: "id=abc123"},
		{name: "no rule", host: "nowhere.com", path: "/", wantCode: 404, wantBody: "404 Not Found: no Ingress rule matches this host and path\n"},
		{name: "no endpoint", host: "empty.com", path: "/", wantCode: 503, wantBody: "Service default/empty has no ready endpoint"},
		{name: "unavailable backend", host: "resource.com", path: "/", wantCode: 503, wantBody: "503 Service Unavailable: backend is a resource (example.com/Bucket), which this controller does not serve\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+tb.http+tc.path, nil)
			req.Host = tc.host
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp := tb.do(t, req)
			got := body(t, resp)
			if resp.StatusCode != tc.wantCode || !strings.Contains(got, tc.wantBody) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, got, tc.wantCode, tc.wantBody)
			}
		})
	}
}

// Regression: the client's X-Forwarded-For was kept and appended to, so
// any client could make the backend believe it came from anywhere. The
// X-Forwarded headers are now the connection's, unless the controller is
// told to trust them (behind another proxy).
func TestForwardedHeaders(t *testing.T) {
	spoofed := map[string]string{"X-Forwarded-For": "192.0.2.7", "X-Forwarded-Proto": "https",
		"X-Forwarded-Host": "bank.example", "X-Forwarded-Port": "8443", "X-Real-IP": "192.0.2.8"}
	for _, tc := range []struct {
		name   string
		trust  bool
		header map[string]string
		want   string
	}{
		{name: "none sent", want: "xff=127.0.0.1 proto=http xhost=foo.com port=PORT realip=127.0.0.1 "},
		{name: "client's replaced", header: spoofed,
			want: "xff=127.0.0.1 proto=http xhost=foo.com port=PORT realip=127.0.0.1 "},
		{name: "trusted: none sent", trust: true,
			want: "xff=127.0.0.1 proto=http xhost=foo.com port=PORT realip=127.0.0.1 "},
		{name: "trusted: kept and appended", trust: true, header: spoofed,
			want: "xff=192.0.2.7, 127.0.0.1 proto=https xhost=bank.example port=8443 realip=192.0.2.7 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.TrustForwardedHeaders = tc.trust
			tb := newTestBed(t, o)
			tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
			_, port, _ := strings.Cut(tb.http, ":")
			req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
			req.Host = "foo.com"
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			got := body(t, tb.do(t, req))
			if want := strings.ReplaceAll(tc.want, "PORT", port); !strings.Contains(got, want) {
				t.Errorf("got %q, want it to contain %q", got, want)
			}
		})
	}
}

func TestGeneratedRequestID(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	ids := map[string]bool{}
	for range 2 {
		req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
		req.Host = "foo.com"
		got := body(t, tb.do(t, req))
		_, id, _ := strings.Cut(got, "id=")
		if len(id) != 32 {
			t.Fatalf("got request id %q, want 32 hex digits", id)
		}
		ids[id] = true
	}
	if len(ids) != 2 {
		t.Errorf("got the same request id twice: %v", ids)
	}
}

func TestRedirectToHTTPS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		httpsPort int
		host      string
		want      string
	}{
		{name: "default port", httpsPort: 443, host: "foo.com:8080", want: "https://foo.com/a/b?c=d&e"},
		{name: "other port", httpsPort: 8443, host: "foo.com", want: "https://foo.com:8443/a/b?c=d&e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.HTTPSPort = tc.httpsPort
			tb := newTestBed(t, o)
			tb.backend("foo.com", route.Match{RedirectHTTPS: true}, addr(echo(t, "foo")))
			req, _ := http.NewRequest("GET", "http://"+tb.http+"/a/b?c=d&e", nil)
			req.Host = tc.host
			resp := tb.do(t, req)
			resp.Body.Close()
			if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusPermanentRedirect || got != tc.want {
				t.Errorf("got %d to %q, want 308 to %q", resp.StatusCode, got, tc.want)
			}
		})
	}
}

// A request to a backend whose first endpoint refuses connections is sent
// to another one: nothing was sent, so any method may be retried, a POST
// with a body (http.Transport's path) as a GET (the direct path).
func TestRetryRefusedEndpoint(t *testing.T) {
	for _, method := range []string{"POST", "GET"} {
		t.Run(method, func(t *testing.T) { testRetryRefusedEndpoint(t, method) })
	}
}

func testRetryRefusedEndpoint(t *testing.T, method string) {
	tb := newTestBed(t, DefaultOptions())
	refused := refusedAddr(t)
	b := tb.backend("foo.com", route.Match{}, refused, refused, addr(echo(t, "live")))
	b.Service = types.NamespacedName{Namespace: "default", Name: "foo"}
	errors := func() float64 {
		return testutil.ToFloat64(tb.metrics.connectErrors.WithLabelValues("default/foo", "80"))
	}
	send := func(i int) {
		t.Helper()
		var payload io.Reader
		if method == "POST" {
			payload = strings.NewReader(fmt.Sprint("payload", i))
		}
		req, _ := http.NewRequest(method, "http://"+tb.http+"/submit", payload)
		req.Host = "foo.com"
		resp := tb.do(t, req)
		got := body(t, resp)
		want := "live GET /submit  "
		if method == "POST" {
			want = fmt.Sprintf("live POST /submit payload%d", i)
		}
		if resp.StatusCode != 200 || !strings.HasPrefix(got, want) {
			t.Fatalf("request %d: got %d %q, want 200 %q", i, resp.StatusCode, got, want)
		}
	}
	// Endpoints are picked at random: send until the refused one was tried.
	for i := 0; errors() == 0; i++ {
		if i == 100 {
			t.Fatal("the refused endpoint was never tried")
		}
		send(i)
	}
	// It was ejected at its first failure: no more tries, no more errors.
	for i := range 20 {
		send(i)
	}
	if got := errors(); got != 1 {
		t.Errorf("got %v upstream connect errors, want 1", got)
	}
}

// With every endpoint refusing, the client gets a 502 after a few tries.
func TestAllEndpointsRefuse(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, refusedAddr(t), refusedAddr(t))
	req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
	req.Host = "foo.com"
	resp := tb.do(t, req)
	if got := body(t, resp); resp.StatusCode != http.StatusBadGateway || got != "502 Bad Gateway: the endpoint failed to answer\n" {
		t.Errorf("got %d %q, want 502", resp.StatusCode, got)
	}
}

// An endpoint that takes longer than the read timeout to answer is
// answered 504 for it.
func TestReadTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{Options: &route.Options{ReadTimeout: time.Millisecond}}, addr(slow))
	req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
	req.Host = "foo.com"
	resp := tb.do(t, req)
	if got := body(t, resp); resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("got %d %q, want 504", resp.StatusCode, got)
	}
}

func TestOversizedHeader(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
	req.Host = "foo.com"
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp := tb.do(t, req)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("got %d, want 431", resp.StatusCode)
	}
}

func TestRequestMetrics(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	for _, p := range []string{"/a", "/b", "/c"} {
		req, _ := http.NewRequest("GET", "http://"+tb.http+p, nil)
		req.Host = "foo.com"
		body(t, tb.do(t, req))
	}
	// Counted by the rule's path, not the request's.
	if got := testutil.ToFloat64(tb.metrics.requests.WithLabelValues("default/web", "foo.com", "/", "GET", "2xx")); got != 3 {
		t.Errorf("got %v requests, want 3", got)
	}
	// And by backend Service, for the service map.
	if got := tb.metrics.Backends().Services; !reflect.DeepEqual(got, map[string]BackendCounts{"default/foo": {Requests: 3}}) {
		t.Errorf("by backend: got %v, want 3 requests to default/foo", got)
	}
}

// The connect timeout of an Ingress's options bounds the dial on both
// paths to endpoints (direct for a GET, http.Transport for a POST): one
// too short to connect is a 504.
func TestConnectTimeout(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{Options: &route.Options{ConnectTimeout: time.Nanosecond}}, addr(echo(t, "foo")))
	for _, method := range []string{"GET", "POST"} {
		var payload io.Reader
		if method == "POST" {
			payload = strings.NewReader("x")
		}
		req, _ := http.NewRequest(method, "http://"+tb.http+"/", payload)
		req.Host = "foo.com"
		resp := tb.do(t, req)
		if got := body(t, resp); resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("%s: got %d %q, want 504", method, resp.StatusCode, got)
		}
	}
	// The service map counts those 504s as the backend's errors.
	rec := httptest.NewRecorder()
	tb.metrics.serveBackends(rec, httptest.NewRequest("GET", "/status/backends", nil))
	if want := `{"services":{"default/foo":{"requests":2,"errors":2}}}`; strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("/status/backends: got %s, want %s", rec.Body, want)
	}
}

// Regression: a response that failed midway (the endpoint closed its
// connection before the end of the body) ended the handler in a panic,
// and the request was neither counted nor logged.
func TestFailedResponseCounted(t *testing.T) {
	ln := rawBackend(t, func(_ int, c net.Conn, req *http.Request) {
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..")
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
	req.Host = "foo.com"
	// The client sees the connection closed, before or after the head.
	if resp, err := noRedirects.Do(req); err == nil {
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Errorf("read the whole response, want it cut short")
		}
		resp.Body.Close()
	}
	if got := testutil.ToFloat64(tb.metrics.requests.WithLabelValues("default/web", "foo.com", "/", "GET", "2xx")); got != 1 {
		t.Errorf("got %v requests counted, want 1", got)
	}
}

// A client that shuts down its side of the connection while its request
// is under way gets no answer, on the loop and on net/http's server: the
// connection is closed, as nginx closes it, and the request is logged
// 499. Pins the bug where it was sent a made-up "200 OK" with an empty
// body, which a client or cache still reading took for the endpoint's.
func TestClientGoneGetsNoAnswer(t *testing.T) {
	for _, tc := range []struct{ name, req string }{
		{"loop", "GET /wait HTTP/1.1\r\nHost: foo.com\r\n\r\n"},
		{"net/http", "POST /wait HTTP/1.1\r\nHost: foo.com\r\nContent-Length: 2\r\n\r\nhi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestBed(t, DefaultOptions())
			never := make(chan struct{})
			t.Cleanup(func() { close(never) })
			tb.backend("foo.com", route.Match{}, keepAliveBackend(t, func(_ int, c net.Conn, req *http.Request) bool {
				<-never
				return false
			}, nil))
			c, err := net.Dial("tcp", tb.http)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, tc.req)
			c.(*net.TCPConn).CloseWrite()
			if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
				t.Errorf("got %q (%v), want the connection closed with no answer", got, err)
			}
			if lines := tb.accessLines(); len(lines) != 2 || !strings.Contains(lines[0], " 499 ") {
				t.Errorf("access log: got %q, want one request logged 499", lines)
			}
		})
	}
}

// A request without an X-Request-ID gets a new one of 32 hex digits, as
// nginx's $request_id, different for each request.
func TestNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		var b [32]byte
		putRequestID(&b)
		id := string(b[:])
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("got %q, want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("got %q twice", id)
		}
		seen[id] = true
	}
}
