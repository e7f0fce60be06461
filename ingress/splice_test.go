package ingress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/ingress/route"
)

// pattern is n bytes that differ from one 4-byte word to the next, so
// that a body out of order or with a piece missing or repeated does not
// compare equal.
func pattern(n int) []byte {
	b := make([]byte, 0, n+4)
	for i := uint32(0); len(b) < n; i++ {
		b = fmt.Appendf(b, "%08x", i*2654435761)
	}
	return b[:n]
}

// Large bodies of known length are spliced from the endpoint to the
// client: each arrives whole and in order, the bytes the endpoint sent
// with the head (read with it into the connection's buffer) first, for
// sizes on either side of where splicing starts and of what one splice
// moves at most (a megabyte),
// with heads of a few bytes and of most of the endpoint connection's
// buffer; the endpoint's connection serves the next requests; the
// access log counts every byte.
func TestSplicedBody(t *testing.T) {
	sizes := []int{spliceMin - 1, spliceMin, spliceMin + 4<<10 - 1, spliceMin + 4<<10 + 1,
		128<<10 + 1, 1<<20 + 3, 2<<20 + 5}
	for _, padding := range []int{0, 3 << 10} {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("head+%d/body %d", padding, size), func(t *testing.T) {
				payload := pattern(size)
				ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
					// One write: the proxy reads as much of the body as
					// fits its buffer with the head.
					head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"+
						"X-Conn: %d\r\nX-Pad: %s\r\nContent-Length: %d\r\n\r\n", n, strings.Repeat("p", padding), size)
					c.Write(append([]byte(head), payload...))
					return true
				}, nil)
				tb := newTestBed(t, DefaultOptions())
				tb.backend("foo.com", route.Match{}, ln)
				// The loop logs a request before it reads the next one
				// of the connection: the third request is for the
				// first two to be logged.
				for i := range 3 {
					resp := tb.get(t, "GET", "/big")
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || !bytes.Equal(got, payload) {
						t.Fatalf("request %d: got %d bytes (%v), equal %v, want the %d sent", i, len(got), err, bytes.Equal(got, payload), size)
					}
					if got := resp.Header.Get("X-Conn"); got != "1" {
						t.Errorf("request %d: endpoint connection %s, want 1 (kept alive)", i, got)
					}
				}
				lines := tb.accessLines()
				want := " 200 " + strconv.Itoa(size) + " "
				if len(lines) < 3 || !strings.Contains(lines[0], want) || !strings.Contains(lines[1], want) {
					t.Errorf("access log: got %q, want two lines with %q", lines, want)
				}
			})
		}
	}
}

// A body without Content-Type is sniffed from its first bytes as before,
// whether they came with the head or not.
func TestSplicedBodySniffed(t *testing.T) {
	size := 2 * spliceMin
	payload := append([]byte("<html><body>"), pattern(size-12)...)
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
		c.Write(payload)
		return true
	}, nil)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	resp := tb.get(t, "GET", "/page")
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("got %d bytes (%v), want the %d sent", len(got), err, size)
	}
	if ct, want := resp.Header.Get("Content-Type"), "text/html; charset=utf-8"; ct != want {
		t.Errorf("got Content-Type %q, want %q", ct, want)
	}
}

// A body the endpoint ends short, closing its connection, ends the
// client's connection after the bytes that came, as copyBody's does: the
// client cannot take the response for whole. The access log counts what
// was sent.
func TestSplicedBodyShort(t *testing.T) {
	const announced, sent = 1 << 20, 300<<10 + 7
	payload := pattern(sent)
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", announced)
		c.Write(payload)
		return false
	}, nil)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, ln)
	c, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: foo.com\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(got, payload) {
		t.Errorf("got %d bytes, equal %v, and %v; want the %d sent, then the connection closed (unexpected EOF)",
			len(got), bytes.Equal(got, payload), err, sent)
	}
	want := " " + strconv.Itoa(sent) + " "
	// The line is written before the client's connection is closed.
	if lines := tb.accessLines(); len(lines) < 2 || !strings.Contains(lines[0], want) {
		t.Errorf("access log: got %q, want a line with %q", lines, want)
	}
}

// An endpoint that stops sending in the middle of a spliced body is
// given up after the read timeout, as when the body is copied: the
// client's connection ends after what came.
func TestSplicedBodyReadTimeout(t *testing.T) {
	const announced, sent = 1 << 20, 200 << 10
	payload := pattern(sent)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", announced)
		c.Write(payload)
		<-release
		return false
	}, nil)
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{Options: &route.Options{ReadTimeout: 200 * time.Millisecond}}, ln)
	resp := tb.get(t, "GET", "/big")
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !bytes.Equal(got, payload) {
		t.Errorf("got %d bytes, equal %v, and %v; want the %d sent, then the connection closed", len(got), bytes.Equal(got, payload), err, sent)
	}
}

// A client that takes a large spliced body slowly but steadily gets it
// whole, though the body takes many times the send and read timeouts:
// each is cut only when its side has moved nothing for it. The kernel
// takes the first megabytes of the body at once, then lets the proxy
// write again only when about half of them have gone, which takes the
// client longer than the timeouts.
func TestSplicedBodySlowClient(t *testing.T) {
	const size = 8 << 20
	payload := pattern(size)
	ln := keepAliveBackend(t, func(n int, c net.Conn, req *http.Request) bool {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", size)
		c.Write(payload)
		return true
	}, nil)
	o := DefaultOptions()
	o.ClientSendTimeout = 500 * time.Millisecond
	tb := newTestBed(t, o)
	tb.backend("foo.com", route.Match{Options: &route.Options{ReadTimeout: 500 * time.Millisecond}}, ln)
	c, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(32 << 10)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: foo.com\r\n\r\n")
	// About 1.6 MB/s: 5 s for the body, 1.3 s for 2 MB.
	resp, err := http.ReadResponse(bufio.NewReaderSize(steadyReader{c}, 32<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, payload) {
		t.Errorf("got %d bytes, equal %v, and %v; want the %d sent", len(got), bytes.Equal(got, payload), err, size)
	}
}

// steadyReader reads at most 32 KiB at a time, 20 ms apart.
type steadyReader struct{ r io.Reader }

func (s steadyReader) Read(p []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 32<<10)])
}
