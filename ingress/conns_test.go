package ingress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"portal.dev/portal/ingress/route"
)

// Requests that take the direct path reuse one connection to the
// endpoint; HEAD and a 204 included.
func TestDirectKeepAlive(t *testing.T) {
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
func TestDirectIdleConnectionClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted++
			n := accepted
			// One answer per connection, then close it, no
			// "Connection: close" said.
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil {
				body := fmt.Sprintf("conn %d %s", n, req.URL.Path)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			}
			c.Close()
		}
	}()
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln.Addr().String())
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
