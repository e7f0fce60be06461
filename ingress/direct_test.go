package ingress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"portal.dev/portal/ingress/route"
)

// get sends a GET (or method, without a body) for foo.com's path through
// the plain listener.
func (tb *testBed) get(t *testing.T, method, path string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+tb.http+path, nil)
	req.Host = "foo.com"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return tb.do(t, req)
}

// Hop-by-hop fields, those a Connection field names among them, go
// neither to the endpoint nor back to the client.
func TestHopByHopHeaders(t *testing.T) {
	ln := rawBackend(t, func(_ int, c net.Conn, req *http.Request) {
		var seen []string
		for _, k := range []string{"X-Foo", "Proxy-Authorization", "Keep-Alive", "X-Kept", "Te"} {
			if v := req.Header.Get(k); v != "" {
				seen = append(seen, k+"="+v)
			}
		}
		body := strings.Join(seen, " ")
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: X-Bar\r\nX-Bar: 1\r\nKeep-Alive: timeout=5\r\n"+
			"X-Kept: yes\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	resp := tb.get(t, "GET", "/", "Connection", "X-Foo", "X-Foo", "1", "Proxy-Authorization", "secret",
		"Keep-Alive", "timeout=1", "X-Kept", "yes", "Te", "trailers")
	got := body(t, resp)
	if want := "X-Kept=yes Te=trailers"; got != want {
		t.Errorf("endpoint got %q, want %q", got, want)
	}
	var back []string
	for _, k := range []string{"X-Bar", "Keep-Alive", "X-Kept"} {
		if v := resp.Header.Get(k); v != "" {
			back = append(back, k+"="+v)
		}
	}
	if got, want := strings.Join(back, " "), "X-Kept=yes"; got != want {
		t.Errorf("client got %q, want %q", got, want)
	}
}

// A response of unknown length reaches the client piece by piece, not at
// its end, and its trailers follow it: announced ones by name, others
// with http.TrailerPrefix, as ReverseProxy passes them.
func TestStreamedResponseAndTrailers(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "one\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "two\n")
		w.Header().Set("X-Sum", "2")
		w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
	}))
	t.Cleanup(backend.Close)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(backend))
	resp := tb.get(t, "GET", "/")
	defer resp.Body.Close()
	if got := fmt.Sprint(resp.Trailer); got != "map[X-Sum:[]]" {
		t.Errorf("got trailers announced %s, want X-Sum", got)
	}
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	close(release)
	if err != nil || first != "one\n" {
		t.Fatalf("got first piece %q (%v), want %q before the rest was written", first, err, "one\n")
	}
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "two\n" {
		t.Errorf("got rest %q (%v), want %q", rest, err, "two\n")
	}
	if got := fmt.Sprint(resp.Trailer); got != "map[X-Late:[yes] X-Sum:[2]]" {
		t.Errorf("got trailers %s, want X-Sum and X-Late", got)
	}
}

// An endpoint that sends informational answers without end gets 502, as
// with http.Transport.
func TestTooMany1xx(t *testing.T) {
	ln := rawBackend(t, func(_ int, c net.Conn, req *http.Request) {
		fmt.Fprint(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n", max1xxResponses+1)+
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	resp := tb.get(t, "GET", "/")
	if got := body(t, resp); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("got %d %q, want 502", resp.StatusCode, got)
	}
}

// keepAliveBackend answers every request of each connection with answer,
// given the connection's number, and tells on closed when a connection
// is closed. It returns its address.
func keepAliveBackend(t *testing.T, answer func(n int, c net.Conn, req *http.Request) bool, closed chan<- int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil || !answer(n, c, req) {
						break
					}
				}
				c.Close()
				if closed != nil {
					closed <- n
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A connection whose endpoint sent more than the response announced is
// not used again: the surplus would be read as the next answer.
func TestNoReuseAfterSurplus(t *testing.T) {
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		body := fmt.Sprintf("conn %d", n)
		surplus := ""
		if n == 1 {
			surplus = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforged"
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s%s", len(body), body, surplus)
		return true
	}, nil)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	for i, want := range []string{"conn 1", "conn 2", "conn 2"} {
		if got := body(t, tb.get(t, "GET", "/")); got != want {
			t.Errorf("request %d: got %q, want %q", i, got, want)
		}
	}
}

// Regression: a request that cannot be sent twice (a POST) went out on a
// connection the endpoint had closed while it was idle, and failed;
// http.Transport would have known. Each request here takes the pooled
// connection the endpoint closed after the last answer, at once: a GET
// is sent on it unchecked, fails and goes again on a new connection; a
// POST or DELETE gets the check, which finds the connection closed, and
// goes out once, on a new one.
func TestRequestAfterIdleClose(t *testing.T) {
	closed := make(chan int, 10)
	var mu sync.Mutex
	seen := map[string]int{} // requests by method
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		mu.Lock()
		seen[req.Method]++
		mu.Unlock()
		body := fmt.Sprintf("conn %d %s", n, req.Method)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return false // closed after each answer, without saying so
	}, closed)
	tb := newTestBed(t, DefaultOptions())
	tb.stopClock() // every pooled connection is taken right away
	tb.backend("foo.com", route.Match{}, ln)
	methods := []string{"GET", "POST", "DELETE", "GET"}
	for i, method := range methods {
		resp := tb.get(t, method, "/")
		if got, want := body(t, resp), fmt.Sprintf("conn %d %s", i+1, method); got != want {
			t.Fatalf("request %d: got %d %q, want 200 %q", i, resp.StatusCode, got, want)
		}
		<-closed // before the next request
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := seen, map[string]int{"GET": 2, "POST": 1, "DELETE": 1}; !maps.Equal(got, want) {
		t.Errorf("the endpoint saw %v, want %v", got, want)
	}
}

// testClock is a balancer clock that stands still but for the steps a
// test takes: how long a pooled connection stays idle is the test's to
// say.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// stopClock gives tb's balancer a testClock, before tb's first request.
func (tb *testBed) stopClock() *testClock {
	c := &testClock{t: time.Now()}
	tb.handler.balancer.now = c.now
	return c
}

// A client that goes away while the endpoint thinks ends the exchange:
// the endpoint's connection is closed, not left waiting for the read
// timeout.
func TestClientGoneClosesEndpointConnection(t *testing.T) {
	arrived, gone := make(chan struct{}), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(gone)
	}))
	t.Cleanup(backend.Close)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(backend))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+tb.http+"/", nil)
	req.Host = "foo.com"
	go func() { <-arrived; cancel() }()
	if _, err := noRedirects.Do(req); err == nil {
		t.Errorf("got an answer, want the request cancelled")
	}
	<-gone
}

// Regression: a GET that timed out on a pooled connection was sent again
// on another one, pooled or new, and the client waited the read timeout
// once more for each. As with http.Transport, only a connection the
// endpoint closed before answering is a reason to send a request again:
// the answer is 504 after one timeout.
func TestNoRetryAfterReadTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var mu sync.Mutex
	requests := map[int]int{} // by connection
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		mu.Lock()
		requests[n]++
		second := requests[n] == 2
		mu.Unlock()
		if second {
			<-release // hangs on the second request of each connection
			return false
		}
		body := fmt.Sprintf("conn %d", n)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	}, nil)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{Options: &route.Options{ReadTimeout: 300 * time.Millisecond}}, ln)
	if got := body(t, tb.get(t, "GET", "/")); got != "conn 1" {
		t.Fatalf("first request: got %q, want %q", got, "conn 1")
	}
	resp := tb.get(t, "GET", "/")
	if got := body(t, resp); resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("second request: got %d %q, want 504", resp.StatusCode, got)
	}
}

// Regression: what an endpoint sent on a keep-alive connection while it
// was idle was read as the answer to the next GET: the 408 that HAProxy,
// Tomcat and others send when they time out an idle connection, or a
// stray response. As http.Transport does, the proxy drops such a
// connection and sends the request on a new one: after the check of a
// connection idle for uncheckedIdle, or, for a 408 on a connection used
// at once, after the 408.
func TestBytesOnIdleConnection(t *testing.T) {
	const (
		timedOut = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
		stray    = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"
	)
	for _, tc := range []struct {
		name, late string
		idle       time.Duration
		keepOpen   bool
	}{
		{name: "408 on the endpoint's idle timeout", late: timedOut, idle: uncheckedIdle},
		{name: "408 on a connection taken at once", late: timedOut},
		{name: "unsolicited response, then close", late: stray, idle: uncheckedIdle},
		{name: "unsolicited response, kept open", late: stray, idle: uncheckedIdle, keepOpen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send, sent := make(chan struct{}), make(chan struct{})
			late := false // sent already; conn 1's goroutine alone uses it
			ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
				body := fmt.Sprintf("conn %d", n)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				if n > 1 || late {
					return true
				}
				<-send
				io.WriteString(c, tc.late)
				late = true
				close(sent)
				return tc.keepOpen
			}, nil)
			tb := newTestBed(t, DefaultOptions())
			clock := tb.stopClock()
			tb.backend("foo.com", route.Match{}, ln)
			if got := body(t, tb.get(t, "GET", "/")); got != "conn 1" {
				t.Fatalf("first request: got %q, want %q", got, "conn 1")
			}
			close(send)
			<-sent // the late bytes are in the proxy's socket
			clock.step(tc.idle)
			resp := tb.get(t, "GET", "/")
			if got := body(t, resp); resp.StatusCode != http.StatusOK || got != "conn 2" {
				t.Errorf("second request: got %d %q, want 200 %q", resp.StatusCode, got, "conn 2")
			}
		})
	}
}

// An endpoint that answers 408 on a reused connection timed it out just
// as the request arrived: the request is sent again, once, on a new
// connection, as http.Transport does with the 408s it catches. A 408 on
// the new connection is the answer.
func TestRequestTimeoutOnReusedConnection(t *testing.T) {
	var mu sync.Mutex
	requests := map[int]int{} // by connection
	conns := 0
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		mu.Lock()
		requests[n]++
		first := requests[n] == 1
		conns = max(conns, n)
		mu.Unlock()
		if req.URL.Path == "/408" || !first {
			io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			return false
		}
		body := fmt.Sprintf("conn %d", n)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	}, nil)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	for i, tc := range []struct {
		path string
		code int
		body string
	}{{"/", 200, "conn 1"}, {"/", 200, "conn 2"}, {"/408", 408, ""}} {
		resp := tb.get(t, "GET", tc.path)
		if got := body(t, resp); resp.StatusCode != tc.code || got != tc.body {
			t.Errorf("request %d: got %d %q, want %d %q", i, resp.StatusCode, got, tc.code, tc.body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 3 {
		t.Errorf("got %d connections to the endpoint, want 3", conns)
	}
}

// Regression: informational answers reached the client with their
// hop-by-hop fields, which only the final answer lost.
func TestHopByHopHeadersOf1xx(t *testing.T) {
	ln := rawBackend(t, func(_ int, c net.Conn, req *http.Request) {
		fmt.Fprint(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: X-Hop\r\nX-Hop: 1\r\n"+
			"Keep-Alive: timeout=5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprint(code, " ", h))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "http://"+tb.http+"/", nil)
	req.Host = "foo.com"
	if got := body(t, tb.do(t, req)); got != "ok" {
		t.Fatalf("got %q, want %q", got, "ok")
	}
	if got, want := strings.Join(hints, "; "), "103 map[Link:[</a.css>; rel=preload]]"; got != want {
		t.Errorf("client got 1xx %q, want %q", got, want)
	}
}

// A bodiless request goes to its endpoint with "Content-Length: 0" only
// where Request.Write adds it: for the methods that usually have a body.
func TestBodilessContentLength(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, keepAliveBackend(t, func(_ int, c net.Conn, req *http.Request) bool {
		got := fmt.Sprint(req.Header["Content-Length"])
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(got), got)
		return true
	}, nil))
	for method, want := range map[string]string{
		"GET": "[]", "DELETE": "[]", "OPTIONS": "[]", "POST": "[0]", "PUT": "[0]", "PATCH": "[0]",
	} {
		if got := body(t, tb.get(t, method, "/")); got != want {
			t.Errorf("%s: the endpoint got Content-Length %s, want %s", method, got, want)
		}
	}
}

// The forwarded fields of each request on a keep-alive connection are
// its own, though the connection keeps those of its last request for
// the next: a new Host makes new ones, and each request without an
// X-Request-ID gets a new one.
func TestForwardedFieldsPerRequest(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	_, port, _ := strings.Cut(tb.http, ":")
	c, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	var ids []string
	for _, tc := range []struct{ host, header, wantHost, wantID string }{
		{host: "foo.com", wantHost: "foo.com"},
		{host: "FOO.com:" + port, wantHost: "FOO.com:" + port},
		{host: "foo.com", header: "X-Request-ID: given\r\n", wantHost: "foo.com", wantID: "given"},
		{host: "foo.com", wantHost: "foo.com"},
	} {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n", tc.host, tc.header)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := body(t, resp)
		want := "xhost=" + tc.wantHost + " port=" + port + " realip=127.0.0.1 id="
		_, id, _ := strings.Cut(got, " id=")
		if !strings.Contains(got, want) || tc.wantID != "" && id != tc.wantID {
			t.Errorf("Host %s: got %q, want %q with id=%s", tc.host, got, want, tc.wantID)
		}
		if tc.wantID == "" {
			if len(id) != 32 || slices.Contains(ids, id) {
				t.Errorf("Host %s: got id %q, want a new one of 32 hex digits (had %q)", tc.host, id, ids)
			}
			ids = append(ids, id)
		}
	}
}

// The endpoint's hop-by-hop fields, those its Connection field names
// among them, do not reach the client over the loop's connection, nor
// does a Trailer field of a response that is not chunked, and the
// client's connection stays open. The client's own Connection: close
// still gets one back.
func TestEndpointHopByHopOnLoop(t *testing.T) {
	ln := rawBackend(t, func(_ int, c net.Conn, req *http.Request) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Bar\r\nX-Bar: 1\r\nKeep-Alive: timeout=5\r\n"+
			"Trailer: X-Gone\r\nProxy-Authenticate: Basic\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok")
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	c, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for _, close := range []bool{false, false, true} {
		head := "GET / HTTP/1.1\r\nHost: foo.com\r\n\r\n"
		if close {
			head = "GET / HTTP/1.1\r\nHost: foo.com\r\nConnection: close\r\n\r\n"
		}
		io.WriteString(c, head)
		tp := textproto.NewReader(br)
		status, err := tp.ReadLine()
		if err != nil {
			t.Fatalf("Connection: close %v: %v", close, err)
		}
		h, err := tp.ReadMIMEHeader()
		if err != nil || status != "HTTP/1.1 200 OK" {
			t.Fatalf("got %q %v, want 200", status, err)
		}
		io.CopyN(io.Discard, br, 2)
		for _, k := range []string{"X-Bar", "Keep-Alive", "Trailer", "Proxy-Authenticate"} {
			if v := h.Get(k); v != "" {
				t.Errorf("client got %s: %s, want none", k, v)
			}
		}
		if got, want := h.Get("Connection"), map[bool]string{true: "close"}[close]; got != want || h.Get("X-Kept") != "yes" {
			t.Errorf("client's Connection: close %v: got Connection %q, X-Kept %q, want %q and yes", close, got, h.Get("X-Kept"), want)
		}
	}
}
