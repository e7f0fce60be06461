package ingress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/ingress/route"
)

// statusBackend answers /status/N with status N (an empty body where
// one is allowed, "body" otherwise) and any other path with the method
// and the request body.
func statusBackend(t *testing.T) string {
	t.Helper()
	return keepAliveBackend(t, func(_ int, c net.Conn, req *http.Request) bool {
		var code int
		if _, err := fmt.Sscanf(req.URL.Path, "/status/%d", &code); err == nil {
			fmt.Fprintf(c, "HTTP/1.1 %d X\r\nX-Code: %d\r\n\r\n", code, code)
			return true
		}
		b, _ := io.ReadAll(req.Body)
		msg := req.Method + " " + string(b)
		if req.URL.Path == "/chunked" {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(msg), msg)
			return true
		}
		if req.Method == http.MethodHead {
			msg = ""
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
		return true
	}, nil)
}

// answer is what a client must read back for one request.
type answer struct {
	code  int
	body  string
	close bool // the response says Connection: close
}

// The loop's answers on one client connection, several requests in a
// row, some written at once (pipelined), and requests it hands to
// net/http's server (bodies, HTTP/1.0, malformed heads) with what it
// read of them: every answer comes back in order, and the connection
// is kept until a request or an answer ends it. Regression: every
// request was handed over, as the loop looked for the Host field that
// http.ReadRequest moves out of the header.
func TestConnectionLoop(t *testing.T) {
	get := func(path string, extra ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: foo.com\r\n" + strings.Join(extra, "") + "\r\n"
	}
	long := "X-Long: " + strings.Repeat("a", 6<<10) + "\r\n"
	for _, tc := range []struct {
		name  string
		sends []string // each written at once
		want  []answer
		eof   bool // the connection ends after the last answer
		// handedOff says the connection goes to net/http's server.
		handedOff bool
		// await says each send waits for the answer to the one before,
		// as a keep-alive client that does not pipeline waits.
		await bool
		// pieces says each send but the last leaves the head unfinished:
		// no answer comes before the next.
		pieces bool
	}{
		{name: "keep-alive", sends: []string{get("/a"), get("/b")}, await: true,
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "GET "}}},
		{name: "pipelined", sends: []string{get("/a") + get("/chunked") + get("/c")},
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "GET "}, {code: 200, body: "GET "}}},
		{name: "client closes", sends: []string{get("/a", "Connection: close\r\n")},
			want: []answer{{code: 200, body: "GET ", close: true}}, eof: true},
		{name: "no body statuses", sends: []string{get("/status/204"), get("/status/304"), get("/a")},
			want: []answer{{code: 204}, {code: 304}, {code: 200, body: "GET "}}},
		{name: "HEAD", sends: []string{"HEAD /a HTTP/1.1\r\nHost: foo.com\r\n\r\n", get("/a")},
			want: []answer{{code: 200}, {code: 200, body: "GET "}}},
		{name: "no rule", sends: []string{"GET / HTTP/1.1\r\nHost: nothing.com\r\n\r\n", get("/a")},
			want: []answer{{code: 404, body: "404 Not Found: no Ingress rule matches this host and path\n"}, {code: 200, body: "GET "}}},
		{name: "body after a GET", sends: []string{get("/a"), "POST /p HTTP/1.1\r\nHost: foo.com\r\nContent-Length: 3\r\n\r\nabc", get("/b")},
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "POST abc"}, {code: 200, body: "GET "}}, handedOff: true},
		{name: "HTTP/1.0", sends: []string{"GET /a HTTP/1.0\r\nHost: foo.com\r\n\r\n"},
			want: []answer{{code: 200, body: "GET ", close: true}}, eof: true, handedOff: true},
		{name: "head over the buffer", sends: []string{get("/a", long), get("/b")},
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "GET "}}, handedOff: true},
		{name: "head in pieces", sends: []string{"GET /a HTTP/1.1\r\n", "Host: foo.com\r\n", "\r\n"}, pieces: true,
			want: []answer{{code: 200, body: "GET "}}},
		// Inputs of request smuggling: each is framed as net/http's
		// server frames it, and the request after it is read as sent.
		{name: "Content-Length and Transfer-Encoding", sends: []string{get("/a", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") + "0\r\n\r\n" + get("/b")},
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "GET "}}, handedOff: true},
		{name: "lower-case transfer-encoding", sends: []string{get("/a", "transfer-encoding: chunked\r\n") + "0\r\n\r\n" + get("/b")},
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "GET "}}, handedOff: true},
		{name: "differing Content-Lengths", sends: []string{get("/a", "Content-Length: 0\r\nContent-Length: 5\r\n") + get("/b")},
			want: []answer{{code: 400, close: true}}, eof: true, handedOff: true},
		{name: "obs-fold", sends: []string{get("/a", "X-A: a\r\n b\r\n") + get("/b")},
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "GET "}}},
		{name: "bare LF", sends: []string{"GET /a HTTP/1.1\nHost: foo.com\n\n" + get("/b")},
			want: []answer{{code: 200, body: "GET "}, {code: 200, body: "GET "}}},
		{name: "bare CR", sends: []string{get("/a", "X-A: a\rb\r\n") + get("/b")},
			want: []answer{{code: 400, close: true}}, eof: true, handedOff: true},
		{name: "space before colon", sends: []string{get("/a", "X-A : a\r\n") + get("/b")},
			want: []answer{{code: 400, close: true}}, eof: true, handedOff: true},
		{name: "malformed header", sends: []string{get("/a"), "GET /a HTTP/1.1\r\nHost: foo.com\r\nNo colon\r\n\r\n"},
			want: []answer{{code: 200, body: "GET "}, {code: 400, close: true}}, eof: true, handedOff: true},
		{name: "no Host", sends: []string{"GET /a HTTP/1.1\r\n\r\n"},
			want: []answer{{code: 400, close: true}}, eof: true, handedOff: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestBed(t, DefaultOptions())
			tb.backend("foo.com", route.Match{}, statusBackend(t))
			c, err := net.Dial("tcp", tb.http)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			read := 0 // answers read
			for i, s := range tc.sends {
				io.WriteString(c, s)
				if tc.await && i < len(tc.sends)-1 {
					readAnswer(t, br, read, "GET", tc.want[read])
					read++
				}
				if tc.pieces && i < len(tc.sends)-1 {
					// The loop has the piece (with its read under way
					// for more) before the next comes, most often.
					c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					if n, err := br.Peek(1); !isTimeout(err) {
						t.Fatalf("after piece %d: got %q (%v), want no answer yet", i, n, err)
					}
					c.SetDeadline(time.Now().Add(10 * time.Second))
				}
			}
			for i, want := range tc.want[read:] {
				method := "GET"
				if tc.name == "HEAD" && i+read == 0 {
					method = "HEAD"
				}
				readAnswer(t, br, i+read, method, want)
			}
			if got := tb.handedOff(); got > 0 != tc.handedOff {
				t.Errorf("got %d connections handed to net/http's server, want any: %v", got, tc.handedOff)
			}
			if tc.eof {
				if n, err := br.Read(make([]byte, 1)); err != io.EOF {
					t.Errorf("after the answers: got %d bytes (%v), want the connection closed", n, err)
				}
			}
		})
	}
}

// readAnswer reads answer i, to a request of method, from br.
func readAnswer(t *testing.T, br *bufio.Reader, i int, method string, want answer) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("answer %d: %v", i, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("answer %d: body: %v", i, err)
	}
	if resp.StatusCode != want.code || want.code < 400 && string(b) != want.body ||
		want.code == 404 && string(b) != want.body || resp.Close != want.close {
		t.Errorf("answer %d: got %d %q close=%v, want %d %q close=%v", i, resp.StatusCode, b, resp.Close, want.code, want.body, want.close)
	}
}

// HTTP/1.1 over TLS is served on the loop as plain HTTP is, with the
// forwarded fields of TLS, and a request with a body after it is handed
// over on the same connection; plain HTTP to the TLS port is told so, as
// net/http's server tells it.
func TestConnectionLoopOverTLS(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	tb.backend("foo.com", route.Match{}, addr(echo(t, "foo")))
	c, err := tls.Dial("tcp", tb.https, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i, tc := range []struct {
		send      string
		want      string
		handedOff int64
	}{
		{send: "GET /a HTTP/1.1\r\nHost: foo.com\r\n\r\n", want: "foo GET /a  host=foo.com"},
		{send: "POST /b HTTP/1.1\r\nHost: foo.com\r\nContent-Length: 2\r\n\r\nhi", want: "foo POST /b hi host=foo.com", handedOff: 1},
		{send: "GET /c HTTP/1.1\r\nHost: foo.com\r\n\r\n", want: "foo GET /c  host=foo.com", handedOff: 1},
	} {
		io.WriteString(c, tc.send)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		if !strings.HasPrefix(string(got), tc.want) || !strings.Contains(string(got), "proto=https") {
			t.Errorf("request %d: got %q, want %q... with proto=https", i, got, tc.want)
		}
		if n := tb.handedOff(); n != tc.handedOff {
			t.Errorf("request %d: got %d connections handed over, want %d", i, n, tc.handedOff)
		}
	}

	plain, err := net.Dial("tcp", tb.https)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(plain, "GET / HTTP/1.1\r\nHost: foo.com\r\n\r\n")
	got, _ := io.ReadAll(plain)
	if want := "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"; string(got) != want {
		t.Errorf("plain HTTP to the TLS port: got %q, want %q", got, want)
	}
}

// The answer to HEAD the controller gives itself announces the length
// of the body a GET would get, as net/http's server announces it, and
// has none.
func TestHeadOfLocalAnswer(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	c, err := net.Dial("tcp", tb.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: nothing.com\r\n\r\nGET / HTTP/1.1\r\nHost: nothing.com\r\n\r\n")
	br := bufio.NewReader(c)
	head, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
	if err != nil {
		t.Fatal(err)
	}
	get, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(get.Body)
	if head.StatusCode != 404 || head.ContentLength != int64(len(b)) || len(b) == 0 {
		t.Errorf("HEAD: got %d with Content-Length %d, want 404 with %d, the GET's", head.StatusCode, head.ContentLength, len(b))
	}
}

// The end of an exchange with an endpoint, as the loop's connection runs
// it: like context.AfterFunc on the connection's context, once for each
// exchange, run by the connection's end.
func TestExchangeEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cancelBefore ends the context before the exchange starts,
		// cancelDuring while it runs.
		cancelBefore, cancelDuring bool
		wantRun, wantStop          bool
	}{
		{name: "exchange ends first", wantStop: true},
		{name: "client gone during the exchange", cancelDuring: true, wantRun: true},
		{name: "client gone before the exchange", cancelBefore: true, wantRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &h1Conn{}
			c.ctx, c.cancel = context.WithCancel(context.Background())
			defer c.cancel()
			// A first exchange that ends as usual leaves nothing armed.
			if stop := c.AfterFunc(func() { t.Error("first exchange ended by the client") }); !stop() {
				t.Errorf("first exchange: stop() = false, want true")
			}
			if tc.cancelBefore {
				c.end()
			}
			ran := make(chan struct{})
			stop := c.AfterFunc(func() { close(ran) })
			if tc.cancelDuring {
				c.end()
				<-ran // runs in a goroutine of its own, as context.AfterFunc's
			}
			if got := stop(); got != tc.wantStop {
				t.Errorf("stop() = %v, want %v", got, tc.wantStop)
			}
			select {
			case <-ran:
				if !tc.wantRun {
					t.Error("the exchange was ended, want it left alone")
				}
			default:
				if tc.wantRun {
					t.Error("the exchange was not ended, want it ended")
				}
			}
		})
	}
}

// A connection's first exchange with an endpoint costs at most the one
// allocation of its stop (issue #18: a client that connects for each
// request pays it each time), not a registration on the connection's
// context.
func TestExchangeEndAllocs(t *testing.T) {
	const runs = 100
	conns := make([]h1Conn, runs+1) // AllocsPerRun runs once more first
	for i := range conns {
		conns[i].ctx, conns[i].cancel = context.WithCancel(context.Background())
		defer conns[i].cancel()
	}
	f := func() { t.Error("the exchange was ended, want it left alone") }
	i := 0
	got := testing.AllocsPerRun(runs, func() {
		c := &conns[i]
		i++
		if !c.AfterFunc(f)() {
			t.Error("stop() = false, want true")
		}
	})
	if got > 1 {
		t.Errorf("got %v allocations per connection's first exchange, want at most 1", got)
	}
}

// The fields a response head leaves out for its status: framing always,
// the body's length without a body, its type too for a 304.
func TestHeaderSkip(t *testing.T) {
	for _, tc := range []struct {
		skip headerSkip
		name string
		want bool
	}{
		{noHeaders, "Transfer-Encoding", true},
		{noHeaders, "Content-Length", false},
		{noHeaders, "Content-Type", false},
		{noBodyHeaders, "Content-Length", true},
		{noBodyHeaders, "Content-Type", false},
		{notModifiedHeaders, "Content-Type", true},
		{notModifiedHeaders, "Content-Length", true},
		{notModifiedHeaders, "Etag", false},
	} {
		if got := tc.skip.skips(tc.name); got != tc.want {
			t.Errorf("skip %d, %s: got %v, want %v", tc.skip, tc.name, got, tc.want)
		}
	}
}

// A field's values go out one line each, trimmed, and with their line
// breaks made spaces, so that no value can end the head or add a field.
func TestAppendField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   string
	}{
		{"one", []string{"a"}, "X: a\r\n"},
		{"two", []string{"a", " b "}, "X: a\r\nX: b\r\n"},
		{"line breaks", []string{"a\r\nEvil: 1", "b\nc\rd"}, "X: a  Evil: 1\r\nX: b c d\r\n"},
		{"empty", []string{""}, "X: \r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(appendField(nil, "X", tc.values)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
