package ingress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"portal.dev/portal/ingress/route"
)

// Regression: a WebSocket (any upgraded connection) went on after the
// servers were shut down and Run returned, as Shutdown does not know
// hijacked connections. It now ends after the grace.
func TestUpgradedConnectionEndsWithServe(t *testing.T) {
	ws := httptest.NewServer(websocket.Handler(func(c *websocket.Conn) {
		var msg string
		for websocket.Message.Receive(c, &msg) == nil {
			websocket.Message.Send(c, "echo: "+msg)
		}
	}))
	t.Cleanup(ws.Close)
	at, stop := stoppableServers(t, time.Millisecond, "ws.com", addr(ws))

	conf, _ := websocket.NewConfig("ws://ws.com/chat", "http://ws.com/")
	raw, err := net.Dial("tcp", at)
	if err != nil {
		t.Fatal(err)
	}
	c, err := websocket.NewClient(conf, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got string
	if err := websocket.Message.Send(c, "hello"); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(c, &got); err != nil {
		t.Fatal(err)
	}
	stop()
	// A guard against hanging, not a measure: the connection must be
	// closed already.
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := websocket.Message.Receive(c, &got); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after Serve returned, the WebSocket read got %q (%v), want the connection closed", got, err)
	}
}

// An idle keep-alive connection does not hold the servers after they are
// told to stop: it is closed at once, not after the grace.
func TestIdleConnectionEndsWithServe(t *testing.T) {
	at, stop := stoppableServers(t, time.Hour, "foo.com", addr(echo(t, "foo")))
	c, err := net.Dial("tcp", at)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: foo.com\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	stop()
	// A guard against hanging, not a measure.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after Serve returned, the client read %d bytes (%v), want the connection closed", n, err)
	}
}

// stoppableServers serves host on a listener of its own, proxied to
// endpoint, with the given shutdown grace, and gives the listener's
// address and a stop that ends Serve and waits for it to return.
func stoppableServers(t *testing.T, grace time.Duration, host, endpoint string) (string, func()) {
	t.Helper()
	routes := &fakeRoutes{hosts: map[string]route.Match{}}
	h := NewHandler(func() Routes { return routes }, DefaultOptions(), NewMetrics())
	tb := &testBed{routes: routes}
	tb.backend(host, route.Match{}, endpoint)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Servers{grace: grace}
	s.add(ln, h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { s.Serve(ctx); close(served) }()
	t.Cleanup(cancel)
	return ln.Addr().String(), func() {
		t.Helper()
		cancel()
		select {
		case <-served:
		case <-time.After(10 * time.Second): // a guard against hanging, not a measure
			t.Fatal("the servers did not stop")
		}
	}
}
