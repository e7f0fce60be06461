package httpprobe

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestProbe: what one request through a listener reports. The listener
// echoes the Host header and TLS server name it was sent.
func TestProbe(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "https://"+r.Host+"/moved", http.StatusPermanentRedirect)
		case "/big":
			io.WriteString(w, strings.Repeat("x", 10*BodyLimit))
		case "/escape":
			io.WriteString(w, "disk \x1b[31mfull\n")
		case "/post":
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, r.Method+" "+r.Header.Get("X-Injected"))
		default:
			sni := ""
			if r.TLS != nil {
				sni = " sni=" + r.TLS.ServerName
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "host="+r.Host+sni+" path="+r.URL.Path)
		}
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler)
	defer secure.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	addr := func(s *httptest.Server) string { return s.Listener.Addr().String() }

	tests := []struct {
		name    string
		address string
		req     Request
		want    Result
	}{
		{"the Host header and path are sent", addr(plain), Request{HTTP, "web.example", "/a/b"},
			Result{Status: 503, Body: "host=web.example path=/a/b"}},
		{"no host sends the listener's address", addr(plain), Request{HTTP, "", "/"},
			Result{Status: 503, Body: "host=" + addr(plain) + " path=/"}},
		{"TLS carries the host as server name", addr(secure), Request{HTTPS, "web.example", "/"},
			Result{Status: 503, Body: "host=web.example sni=web.example path=/"}},
		{"a redirect is reported, not followed", addr(plain), Request{HTTP, "web.example", "/moved"},
			Result{Status: 308, Location: "https://web.example/moved", Body: `<a href="https://web.example/moved">Permanent Redirect</a>.\n\n`}},
		{"the body is cut at BodyLimit", addr(plain), Request{HTTP, "", "/big"},
			Result{Status: 200, Body: strings.Repeat("x", BodyLimit)}},
		{"control characters come back escaped", addr(plain), Request{HTTP, "", "/escape"},
			Result{Status: 200, Body: `disk \x1b[31mfull\n`}},
		{"always a GET without caller headers", addr(plain), Request{HTTP, "", "/post"},
			Result{Status: 418, Body: "GET "}},
		{"a listener that is not there", closedAddr, Request{HTTP, "web.example", "/"},
			Result{Error: "connection refused: nothing listens there"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Probe(context.Background(), &net.Dialer{}, tc.address, tc.req, 5*time.Second)
			if got.Status != tc.want.Status || !strings.HasPrefix(got.Body, tc.want.Body) || len(got.Body) > len(tc.want.Body)+20 ||
				got.Location != tc.want.Location || got.Error != tc.want.Error || got.Address != tc.address {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// pipeDialer connects to a listener that accepts and never answers.
type pipeDialer struct{ server []net.Conn }

func (p *pipeDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	p.server = append(p.server, s)
	go io.Copy(io.Discard, s)
	return c, nil
}

// TestProbeTimeout: a listener that never answers is reported after the
// timeout, not waited for.
func TestProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &pipeDialer{}
		got := Probe(t.Context(), d, "127.0.0.1:80", Request{HTTP, "web.example", "/"}, 500*time.Millisecond)
		for _, s := range d.server {
			s.Close()
		}
		if got.Status != 0 || got.Error != "no answer within 500ms" {
			t.Errorf("got %+v, want no status and %q", got, "no answer within 500ms")
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string // "" for valid
	}{
		{"plain", Request{HTTP, "web.example", "/"}, ""},
		{"no host", Request{HTTPS, "", "/api/v1"}, ""},
		{"an IPv6 host", Request{HTTP, "fd00::1", "/"}, ""},
		{"another scheme", Request{"gopher", "web.example", "/"}, "want http or https"},
		{"a host with a port", Request{HTTP, "web.example:8080", "/"}, "want a DNS name"},
		{"a host with a user", Request{HTTP, "me@web.example", "/"}, "want a DNS name"},
		{"a relative path", Request{HTTP, "web.example", "api"}, "want an absolute path"},
		{"a full URL as path", Request{HTTP, "web.example", "http://elsewhere/"}, "want an absolute path"},
		{"a query", Request{HTTP, "web.example", "/?a=b"}, "no query"},
		{"a header injected in the path", Request{HTTP, "web.example", "/\r\nX: y"}, "no query, fragment, space or control"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
