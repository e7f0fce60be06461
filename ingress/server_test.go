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
	routes := &fakeRoutes{hosts: map[string]route.Match{}}
	h := NewHandler(func() Routes { return routes }, DefaultOptions(), NewMetrics())
	tb := &testBed{routes: routes}
	tb.backend("ws.com", route.Match{}, addr(ws))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Servers{grace: time.Millisecond}
	s.add(ln, h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { s.Serve(ctx); close(served) }()

	conf, _ := websocket.NewConfig("ws://ws.com/chat", "http://ws.com/")
	raw, err := net.Dial("tcp", ln.Addr().String())
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
	cancel()
	<-served
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
	routes := &fakeRoutes{hosts: map[string]route.Match{}}
	h := NewHandler(func() Routes { return routes }, DefaultOptions(), NewMetrics())
	tb := &testBed{routes: routes}
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Servers{grace: time.Hour}
	s.add(ln, h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { s.Serve(ctx); close(served) }()

	c, err := net.Dial("tcp", ln.Addr().String())
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
	cancel()
	<-served
	// A guard against hanging, not a measure.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after Serve returned, the client read %d bytes (%v), want the connection closed", n, err)
	}
}
