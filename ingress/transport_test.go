package ingress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"portal.dev/portal/ingress/route"
)

// Requests reuse one connection to the endpoint; HEAD and a 204 included.
func TestKeepAlive(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		if r.URL.Path == "/empty" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(backend))
	for i, tc := range []struct{ method, path, want string }{
		{"GET", "/a", "GET /a"},
		{"HEAD", "/b", ""},
		{"GET", "/empty", ""},
		{"OPTIONS", "/c", "OPTIONS /c"},
		{"GET", "/d", "GET /d"},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+tb.http+tc.path, nil)
		req.Host = "foo.com"
		if got := body(t, tb.do(t, req)); got != tc.want {
			t.Errorf("request %d: got %q, want %q", i, got, tc.want)
		}
	}
	if len(conns) != 1 {
		t.Errorf("got %d connections to the endpoint, want 1", len(conns))
	}
}

// An endpoint that closes a keep-alive connection without saying so (as
// servers do when it was idle a while) costs the client nothing: the GET
// is sent again on a new connection.
func TestIdleConnectionClosed(t *testing.T) {
	ln := rawBackend(t, func(n int, c net.Conn, req *http.Request) {
		body := fmt.Sprintf("conn %d %s", n, req.URL.Path)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	for i := range 3 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/r%d", tb.http, i), nil)
		req.Host = "foo.com"
		resp := tb.do(t, req)
		got := body(t, resp)
		if resp.StatusCode != 200 || !strings.HasSuffix(got, fmt.Sprintf(" /r%d", i)) {
			t.Errorf("request %d: got %d %q, want 200 for /r%d", i, resp.StatusCode, got, i)
		}
	}
}

// rawBackend accepts connections on loopback and answers one request per
// connection with answer, written as raw bytes, then closes the
// connection (without saying "Connection: close"). It returns its
// address.
func rawBackend(t *testing.T, answer func(n int, c net.Conn, req *http.Request)) string {
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
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				answer(n, c, req)
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// Regression: bodiless GETs took a path of their own that dropped 103
// Early Hints and read response headers of any size. Every request now
// goes through http.Transport.
func TestEndpointResponseHead(t *testing.T) {
	ln := rawBackend(t, func(_ int, c net.Conn, req *http.Request) {
		switch req.URL.Path {
		case "/hints":
			fmt.Fprint(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		case "/huge":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-Big: %s\r\nContent-Length: 2\r\n\r\nok", strings.Repeat("a", 2*maxResponseHeaderBytes))
		}
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	for _, tc := range []struct {
		name, path string
		wantCode   int
		wantHints  []string
	}{
		{name: "103 early hints passed on", path: "/hints", wantCode: 200, wantHints: []string{"</style.css>; rel=preload"}},
		{name: "oversized response header", path: "/huge", wantCode: 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hints []string
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				if code == http.StatusEarlyHints {
					hints = append(hints, h.Values("Link")...)
				}
				return nil
			}}
			req, _ := http.NewRequest("GET", "http://"+tb.http+tc.path, nil)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			req.Host = "foo.com"
			resp := tb.do(t, req)
			body(t, resp)
			if resp.StatusCode != tc.wantCode || fmt.Sprint(hints) != fmt.Sprint(tc.wantHints) {
				t.Errorf("got %d with hints %q, want %d with hints %q", resp.StatusCode, hints, tc.wantCode, tc.wantHints)
			}
		})
	}
}

// Regression: an endpoint answering 101 Switching Protocols to a request
// that asked for no upgrade, or for another protocol, kept its
// connection open and its request counted in flight for ever.
func TestUnrequestedUpgrade(t *testing.T) {
	ln := rawBackend(t, func(_ int, c net.Conn, req *http.Request) {
		fmt.Fprint(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n")
		// Held open as an upgraded connection would be.
		io.Copy(io.Discard, c)
	})
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	for _, tc := range []struct {
		name    string
		upgrade string
	}{
		{name: "no upgrade asked"},
		{name: "another protocol asked", upgrade: "websocket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
			req.Host = "foo.com"
			if tc.upgrade != "" {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", tc.upgrade)
			}
			resp := tb.do(t, req)
			body(t, resp)
			inFlight := tb.handler.balancer.state(ln).inFlight.Load()
			if resp.StatusCode != http.StatusBadGateway || inFlight != 0 {
				t.Errorf("got %d with %d requests in flight, want 502 with 0", resp.StatusCode, inFlight)
			}
		})
	}
}

// Regression: the h2c transport never pinged its connections, so requests
// to an endpoint that vanished without closing them (a node gone) hung on
// the dead connection until the read timeout.
func TestH2CHealthCheck(t *testing.T) {
	tr := newTransport(&balancer{}, time.Second).h2c
	if tr.ReadIdleTimeout != h2cReadIdleTimeout || tr.PingTimeout != h2cPingTimeout || tr.ReadIdleTimeout == 0 {
		t.Errorf("got ReadIdleTimeout %v and PingTimeout %v, want %v and %v",
			tr.ReadIdleTimeout, tr.PingTimeout, h2cReadIdleTimeout, h2cPingTimeout)
	}
}
