package ingress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/ingress/route"
)

// fakeRoutes routes by host alone: every path of a host gets its Match.
type fakeRoutes struct {
	hosts map[string]route.Match
	certs map[string]*tls.Certificate
}

func (f *fakeRoutes) Route(host, path string, overTLS bool) route.Match {
	m := f.hosts[host]
	if overTLS {
		m.RedirectHTTPS = false
	}
	return m
}

func (f *fakeRoutes) Certificate(serverName string) *tls.Certificate { return f.certs[serverName] }

// testBed is a Handler served on loopback listeners, plain and TLS.
type testBed struct {
	routes  *fakeRoutes
	handler *Handler
	metrics *Metrics
	http    string // address of the plain listener
	https   string // address of the TLS listener
	// accessLog has the access log's lines, under the log's lock.
	accessLog strings.Builder
	servers   *Servers
}

// handedOff is how many connections the loop gave to net/http's servers.
func (tb *testBed) handedOff() int64 {
	var n int64
	for _, l := range tb.servers.listeners {
		n += l.handedOff.Load()
	}
	return n
}

func newTestBed(t testing.TB, o Options) *testBed {
	t.Helper()
	tb := &testBed{routes: &fakeRoutes{hosts: map[string]route.Match{}}, metrics: NewMetrics()}
	routes := func() Routes { return tb.routes }
	tb.handler = NewHandler(routes, o, tb.metrics)
	if tb.handler.accessLog != nil {
		tb.handler.accessLog.w = &tb.accessLog
	}
	generated, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	s := &Servers{}
	tb.servers = s
	for _, overTLS := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var conf *tls.Config
		if overTLS {
			conf = tlsConfig(routes, nil, generated)
			tb.https = ln.Addr().String()
		} else {
			tb.http = ln.Addr().String()
		}
		s.add(ln, tb.handler, conf)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		tb.handler.transport.closeIdle()
	})
	return tb
}

// accessLines returns the lines of the access log so far.
func (tb *testBed) accessLines() []string {
	l := tb.handler.accessLog
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.SplitAfter(tb.accessLog.String(), "\n")
}

// backend adds host to the routes, served by a Service with the given
// endpoints.
func (tb *testBed) backend(host string, m route.Match, endpoints ...string) *route.Backend {
	b := m.Backend
	if b == nil {
		b = &route.Backend{Service: types.NamespacedName{Namespace: "default", Name: strings.Split(host, ".")[0]}, Port: "80"}
		m.Backend = b
	}
	if m.Ingress.Name == "" {
		m.Ingress = types.NamespacedName{Namespace: "default", Name: "web"}
		m.Host, m.Path = host, "/"
	}
	b.SetEndpoints(&route.Endpoints{Ready: endpoints})
	tb.routes.hosts[host] = m
	return b
}

// get sends a request for host through the plain listener.
func (tb *testBed) do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{},
}

// refusedAddr is a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
