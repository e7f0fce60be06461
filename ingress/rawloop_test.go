package ingress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/ingress/route"
)

// A request a client sends while the one before is served is answered
// next, without waiting for anything more from the client: whether it
// comes before the watch on the client starts or while it runs. The loop
// waits for the client's next request without reading first
// (rawloop_unix.go), which must not miss one that came in meanwhile.
func TestRequestSentWhileServed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // from the first request's arrival at the endpoint
	}{
		{"before the watch", 0},
		{"during the watch", 4 * watchDelay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestBed(t, DefaultOptions())
			arrived, release := make(chan struct{}, 1), make(chan struct{})
			tb.backend("foo.com", route.Match{}, keepAliveBackend(t, func(_ int, c net.Conn, req *http.Request) bool {
				if req.URL.Path == "/slow" {
					arrived <- struct{}{}
					<-release
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
				return true
			}, nil))
			c, err := net.Dial("tcp", tb.http)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: foo.com\r\n\r\n")
			<-arrived
			time.Sleep(tc.after)
			io.WriteString(c, "GET /next HTTP/1.1\r\nHost: foo.com\r\n\r\n")
			time.Sleep(10 * time.Millisecond)
			close(release)
			br := bufio.NewReader(c)
			for _, want := range []string{"/slow", "/next"} {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("answer to %s: %v", want, err)
				}
				b, _ := io.ReadAll(resp.Body)
				if string(b) != want {
					t.Errorf("got %q, want %q", b, want)
				}
			}
		})
	}
}

// Requests pipelined beyond what one read of the connection takes are
// all answered: the loop reads on, rather than waiting for the client,
// after a read that filled its buffer.
func TestPipelinedBeyondOneRead(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, statusBackend(t))
	c, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	const n = 40
	req := "GET /a HTTP/1.1\r\nHost: foo.com\r\nX-Pad: " + strings.Repeat("a", 200) + "\r\n\r\n"
	go io.WriteString(c, strings.Repeat(req, n)) // over twice headBufferSize
	br := bufio.NewReader(c)
	for i := range n {
		readAnswer(t, br, i, "GET", answer{code: 200, body: "GET "})
	}
}

// A request still under way on the loop when the shutdown's grace ends
// is ended with its connection, while the request's endpoint never
// answers and the client waits (also during the watch, which holds a
// duplicate of the connection's descriptor): the servers stop, and the
// client finds the connection closed.
func TestRequestUnderWayEndsWithServe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // from the request's arrival at the endpoint to the stop
		grace time.Duration
	}{
		{"before the watch", 0, time.Millisecond},
		{"during the watch", 4 * watchDelay, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, never := make(chan struct{}, 1), make(chan struct{})
			t.Cleanup(func() { close(never) })
			at, stop := stoppableServers(t, tc.grace, "foo.com", keepAliveBackend(t, func(_ int, c net.Conn, req *http.Request) bool {
				arrived <- struct{}{}
				<-never
				return false
			}, nil))
			c, err := net.Dial("tcp", at)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: foo.com\r\n\r\n")
			<-arrived
			time.Sleep(tc.after)
			stop()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if b, err := io.ReadAll(c); err != nil {
				t.Errorf("after Serve returned, the client read %q (%v), want the connection closed", b, err)
			}
		})
	}
}
