package ingress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"portal.dev/portal/ingress/route"
)

// slowReader waits before each read, as a slow peer makes the proxy wait.
type slowReader struct {
	wait time.Duration
	r    io.Reader
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.wait)
	return s.r.Read(p[:min(len(p), 1)])
}

// Regression: the read timeout ran while the proxy waited for the client
// to take the response, and the send timeout while it waited for the
// client's upload, so slow clients got their responses cut off or 504.
// Only the endpoint's silence counts.
func TestIdleTimerTimesTheEndpointOnly(t *testing.T) {
	const timeout = time.Minute
	for _, tc := range []struct {
		name        string
		exchange    func(it *idleTimer)
		wantTimeout bool
	}{{
		name: "client pauses between reads of the response",
		exchange: func(it *idleTimer) {
			resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ab"))}
			it.responding(resp)
			var b [1]byte
			resp.Body.Read(b[:])
			time.Sleep(2 * timeout)
			resp.Body.Read(b[:])
		},
	}, {
		name: "client uploads slowly",
		exchange: func(it *idleTimer) {
			body := &retryBody{body: io.NopCloser(&slowReader{wait: 2 * timeout, r: strings.NewReader("ab")}), timer: it}
			io.ReadAll(body)
			it.responding(&http.Response{StatusCode: 200, Body: http.NoBody})
		},
	}, {
		name: "endpoint silent before the response head",
		exchange: func(it *idleTimer) {
			time.Sleep(2 * timeout)
		},
		wantTimeout: true,
	}, {
		name: "endpoint silent between chunks of the response",
		exchange: func(it *idleTimer) {
			resp := &http.Response{StatusCode: 200, Body: io.NopCloser(&slowReader{wait: 2 * timeout, r: strings.NewReader("ab")})}
			it.responding(resp)
			var b [1]byte
			resp.Body.Read(b[:])
		},
		wantTimeout: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancelCause(context.Background())
				it := newIdleTimer(cancel, &attempt{read: timeout, send: timeout})
				tc.exchange(it)
				it.stop()
				if got := context.Cause(ctx) == errUpstreamTimeout; got != tc.wantTimeout {
					t.Errorf("timed out: got %v, want %v", got, tc.wantTimeout)
				}
				cancel(nil)
			})
		})
	}
}

// deadlineWriter records the read deadlines set through it.
type deadlineWriter struct {
	http.ResponseWriter
	deadlines []time.Time
}

func (w *deadlineWriter) SetReadDeadline(d time.Time) error {
	w.deadlines = append(w.deadlines, d)
	return nil
}

// A client uploading is given the client body timeout for each read of
// its body, and no deadline once the body is read.
func TestClientBodyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &deadlineWriter{}
		b := &clientBody{ReadCloser: io.NopCloser(strings.NewReader("ab")), rc: http.NewResponseController(w), timeout: time.Minute}
		var got []time.Duration
		for {
			_, err := b.Read(make([]byte, 1))
			d := w.deadlines[len(w.deadlines)-1]
			if d.IsZero() {
				got = append(got, 0)
			} else {
				got = append(got, time.Until(d))
			}
			if err != nil {
				break
			}
		}
		want := []time.Duration{time.Minute, time.Minute, 0}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("got deadlines %v after each read, want %v", got, want)
		}
	})
}

// A client that stalls its request body past the client body timeout is
// cut off as nginx 1.22 does at its client_body_timeout: the connection
// is closed with no answer, and the request is logged and counted as 408.
// Pins the bug where the proxy logged 499, then kept the connection open,
// unanswered, for as long as the client liked: the deadline was cleared
// after the read that hit it, and the server's discarding of the rest of
// the body waited on the client.
func TestStalledBody(t *testing.T) {
	o := DefaultOptions()
	o.ClientBodyTimeout = 50 * time.Millisecond
	tb := newTestBed(t, o)
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	c, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /up HTTP/1.1\r\nHost: foo.com\r\nContent-Length: 100\r\n\r\nabc")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Errorf("got %q (%v), want the connection closed with no answer", got, err)
	}
	// The request is recorded before its connection is closed.
	lines := tb.accessLines()
	if len(lines) != 2 || !strings.Contains(lines[0], `"POST /up HTTP/1.1" 408 0 `) {
		t.Errorf("access log: got %q, want one line of a POST /up answered 408", lines)
	}
	if got := testutil.ToFloat64(tb.metrics.requests.WithLabelValues("default/web", "foo.com", "/", "POST", "4xx")); got != 1 {
		t.Errorf("got %v requests counted 4xx, want 1", got)
	}
}

// A client that stops reading a response has its connection closed once
// a write to it waits past the send timeout, as nginx's send_timeout
// closes it, on the loop and on net/http's server alike, and the
// endpoint's connection is given up too. Pins the bug where both waited
// on the client forever, holding the endpoint's connection.
func TestClientSendTimeout(t *testing.T) {
	for _, tc := range []struct{ name, req string }{
		{"loop", "GET /big HTTP/1.1\r\nHost: foo.com\r\n\r\n"},
		{"net/http", "POST /big HTTP/1.1\r\nHost: foo.com\r\nContent-Length: 1\r\n\r\nx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.ClientSendTimeout = 50 * time.Millisecond
			tb := newTestBed(t, o)
			const length = 1 << 30
			gaveUp := make(chan error, 1)
			tb.backend("foo.com", route.Match{}, keepAliveBackend(t, func(_ int, c net.Conn, req *http.Request) bool {
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", length)
				chunk := make([]byte, 32<<10)
				for sent := 0; sent < length; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						gaveUp <- err
						return false
					}
				}
				return false
			}, nil))
			c, err := net.Dial("tcp", tb.http)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4 << 10)
			io.WriteString(c, tc.req)
			select {
			case <-gaveUp:
			case <-time.After(10 * time.Second):
				t.Fatal("the endpoint is still sending to a client that stopped reading 10s ago")
			}
		})
	}
}
