package wstunnel

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// spdyFrame is a SPDY data frame on stream 1 carrying payload.
func spdyFrame(payload string) []byte {
	n := len(payload)
	return append([]byte{0, 0, 0, 1, 0, byte(n >> 16), byte(n >> 8), byte(n)}, payload...)
}

// serve upgrades one request with Upgrade and hands the connection to
// use; it returns the client's WebSocket.
func serve(t *testing.T, use func(net.Conn)) *websocket.Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := Upgrade(w, r, []string{"portforward.k8s.io"})
		if err != nil {
			return
		}
		use(conn)
	}))
	t.Cleanup(srv.Close)
	d := websocket.Dialer{Subprotocols: []string{"SPDY/3.1+portforward.k8s.io"}}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if got := ws.Subprotocol(); got != "SPDY/3.1+portforward.k8s.io" {
		t.Errorf("subprotocol: got %q, want SPDY/3.1+portforward.k8s.io", got)
	}
	return ws
}

// TestWritesWholeFramesAsMessages: each SPDY frame reaches the peer as one
// message, however the writer split it or joined it with others.
func TestWritesWholeFramesAsMessages(t *testing.T) {
	big := strings.Repeat("x", 300<<10)
	writes := [][]byte{
		spdyFrame("whole"),
		spdyFrame("")[:4], spdyFrame("")[4:], // a header in two pieces, no payload
		spdyFrame("abc")[:4], spdyFrame("abc")[4:8], []byte("abc"), // as SPDY's framer writes a data frame
		append(spdyFrame("one"), spdyFrame("two")...), // two frames in one write
		append(spdyFrame("three"), spdyFrame("four")[:6]...), []byte(spdyFrame("four")[6:]),
		spdyFrame(big)[:8], []byte(big),
	}
	want := []string{string(spdyFrame("whole")), string(spdyFrame("")), string(spdyFrame("abc")),
		string(spdyFrame("one")), string(spdyFrame("two")), string(spdyFrame("three")), string(spdyFrame("four")),
		string(spdyFrame(big))}
	ws := serve(t, func(c net.Conn) {
		for _, w := range writes {
			if _, err := c.Write(w); err != nil {
				t.Error(err)
				return
			}
		}
		c.Close()
	})
	for i, w := range want {
		kind, got, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if kind != websocket.BinaryMessage || !bytes.Equal(got, []byte(w)) {
			t.Errorf("message %d: got type %d, %d bytes; want binary, %d bytes", i, kind, len(got), len(w))
		}
	}
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after the frames: got %v, want a normal close", err)
	}
}

// TestReadsAcrossMessages: the peer's messages read as one byte stream,
// ending with io.EOF at its normal close.
func TestReadsAcrossMessages(t *testing.T) {
	got := make(chan []byte, 1)
	ws := serve(t, func(c net.Conn) {
		b, err := io.ReadAll(c)
		if err != nil {
			t.Error(err)
		}
		got <- b
	})
	for _, m := range []string{"hello ", "", "tunnelled ", "world"} {
		if err := ws.WriteMessage(websocket.BinaryMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	if b := <-got; string(b) != "hello tunnelled world" {
		t.Errorf("got %q, want %q", b, "hello tunnelled world")
	}
}

// TestRefusesOtherProtocols: a WebSocket that names no tunnelled protocol
// the server speaks is refused before the upgrade.
func TestRefusesOtherProtocols(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, err := Upgrade(w, r, []string{"portforward.k8s.io"}); err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	d := websocket.Dialer{Subprotocols: []string{"SPDY/3.1+other.k8s.io", "v5.channel.k8s.io"}}
	_, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("got %v (response %v), want 400", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "SPDY/3.1+portforward.k8s.io") {
		t.Errorf("body %q, want the supported protocol named", body)
	}
}
