package ingress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// expiringConn lets a test make the read deadline last set on a
// connection pass at once, as if the connection had stayed idle past it.
type expiringConn struct {
	*net.TCPConn
	deadline time.Time
}

func (c *expiringConn) SetDeadline(t time.Time) error {
	c.deadline = t
	return c.TCPConn.SetDeadline(t)
}

func (c *expiringConn) SetReadDeadline(t time.Time) error {
	c.deadline = t
	return c.TCPConn.SetReadDeadline(t)
}

// expire makes the read deadline set, if one is, pass now.
func (c *expiringConn) expire() {
	if !c.deadline.IsZero() {
		c.TCPConn.SetReadDeadline(aLongTimeAgo)
	}
}

// Regression: the read deadline of a connection's last request stayed set
// while the connection was pooled. Once it had passed, alive() failed,
// and every request that cannot be sent twice (a POST) threw away the
// pooled connections idle longer than the read timeout. The deadline
// still stays set in the pool, and usable clears it once it has passed.
func TestPooledConnectionOutlivesReadTimeout(t *testing.T) {
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	}, nil)
	raw, err := net.Dial("tcp", ln)
	if err != nil {
		t.Fatal(err)
	}
	conn := &expiringConn{TCPConn: raw.(*net.TCPConn)}
	c := newBackendConn(conn)
	defer c.close()
	r, _ := http.NewRequest("GET", "http://foo.com/", nil)
	resp, err := c.roundTrip(contextEnd{context.Background()}, &upstreamRequest{r: r, target: "/"}, &attempt{read: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if !c.finish(resp) {
		t.Fatal("connection not kept for another request")
	}
	conn.expire() // idle longer than the read timeout
	if !c.usable(time.Now().Add(2*time.Minute), false) {
		t.Errorf("pooled connection idle past the read timeout: usable() = false, want true")
	}
}

// Regression: a pooled connection kept the read deadline of its last
// request, a minute on, and a request whose Ingress set a shorter read
// timeout waited the minute out rather than its own.
func TestPooledConnectionTakesShorterReadTimeout(t *testing.T) {
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		if req.URL.Path == "/slow" {
			return true // no answer
		}
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	}, nil)
	raw, err := net.Dial("tcp", ln)
	if err != nil {
		t.Fatal(err)
	}
	c := newBackendConn(raw)
	defer c.close()
	fast, _ := http.NewRequest("GET", "http://foo.com/", nil)
	resp, err := c.roundTrip(contextEnd{context.Background()}, &upstreamRequest{r: fast, target: "/"}, &attempt{read: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if !c.finish(resp) {
		t.Fatal("connection not kept for another request")
	}
	slow, _ := http.NewRequest("GET", "http://foo.com/slow", nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.roundTrip(contextEnd{context.Background()}, &upstreamRequest{r: slow, target: "/slow"}, &attempt{read: 50 * time.Millisecond}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !isTimeout(err) {
			t.Errorf("got %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no timeout 10s into a request with a 50ms read timeout")
	}
}

// A request goes out and is answered both over a connection the proxy
// can write and wait on itself (TCP) and over one it cannot, which takes
// the usual writes.
func TestRoundTripWithAndWithoutRawConn(t *testing.T) {
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
		return true
	}, nil)
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{
		{"raw", func(c net.Conn) net.Conn { return c }},
		{"not raw", func(c net.Conn) net.Conn { return struct{ net.Conn }{c} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := net.Dial("tcp", ln)
			if err != nil {
				t.Fatal(err)
			}
			c := newBackendConn(tc.wrap(raw))
			defer c.close()
			for _, path := range []string{"/first", "/second"} {
				r, _ := http.NewRequest("GET", "http://foo.com"+path, nil)
				resp, err := c.roundTrip(contextEnd{context.Background()}, &upstreamRequest{r: r, target: path}, &attempt{read: time.Minute}, nil)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				if string(body) != path {
					t.Errorf("got %q, want %q", body, path)
				}
				if !c.finish(resp) {
					t.Fatal("connection not kept for another request")
				}
			}
		})
	}
}

// The check of a pooled connection, a system call, is made where what it
// catches would go unhandled: for a request that cannot be sent twice,
// and for any request on a connection idle for uncheckedIdle or longer,
// which may hold an answer nobody asked for. Here the endpoint has
// closed the connection, which only the check can tell.
func TestUsableChecksOnlyWhereNeeded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newBackendConn(raw)
	defer c.close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	peer.Close()
	now := time.Now()
	for _, tc := range []struct {
		name       string
		replayable bool
		idle       time.Duration
		want       bool
	}{
		{"replayable, idle briefly: not checked", true, uncheckedIdle - time.Millisecond, true},
		{"replayable, idle long: checked", true, uncheckedIdle, false},
		{"not replayable, idle briefly: checked", false, 0, false},
		{"not replayable, idle long: checked", false, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.idleSince = now.Add(-tc.idle)
			if got := c.usable(now, tc.replayable); got != tc.want {
				t.Errorf("usable() = %v, want %v", got, tc.want)
			}
		})
	}
}
