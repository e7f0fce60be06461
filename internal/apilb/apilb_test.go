package apilb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// fakeServer stands in for an API server: it greets every connection with
// its name and then echoes.
type fakeServer struct {
	name string
	l    net.Listener
}

func startServer(t *testing.T, name string) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.WriteString(c, name+"\n")
				io.Copy(c, c)
			}()
		}
	}()
	return &fakeServer{name: name, l: l}
}

func (s *fakeServer) addr() string { return s.l.Addr().String() }

// health is a Check whose answers the test sets: down servers cannot be
// reached, notReady ones answer but are not ready.
type health struct {
	mu       sync.Mutex
	down     map[string]bool
	notReady map[string]bool
}

func (h *health) setNotReady(server string, notReady bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.notReady == nil {
		h.notReady = map[string]bool{}
	}
	h.notReady[server] = notReady
}

func (h *health) set(server string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down[server] = down
}

func (h *health) check(_ context.Context, server string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down[server] {
		return errors.New("connection refused")
	}
	if h.notReady[server] {
		return fmt.Errorf("%w: /readyz answered 500", ErrNotReady)
	}
	return nil
}

// startBalancer runs a balancer whose periodic checks never come on their
// own: the test runs them with checkAll.
func startBalancer(t *testing.T, h *health, servers ...string) *Balancer {
	t.Helper()
	b, err := New(Config{Servers: servers, Check: h.check, CheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

// dialThrough connects through the balancer and returns the connection and
// the name of the server that answered ("" when the balancer closed it).
func dialThrough(t *testing.T, b *Balancer) (net.Conn, string) {
	t.Helper()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A failsafe against a hang, not a measurement.
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if line == "" {
		return c, ""
	}
	return c, line[:len(line)-1]
}

// closedByBalancer tells whether c was closed by the far side.
func closedByBalancer(c net.Conn) bool {
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

func TestFailsOverWhenADialFails(t *testing.T) {
	a, bsrv := startServer(t, "a"), startServer(t, "b")
	b := startBalancer(t, &health{down: map[string]bool{}}, a.addr(), bsrv.addr())
	if _, got := dialThrough(t, b); got != "a" {
		t.Fatalf("first connection went to %q, want a", got)
	}
	a.l.Close()
	if _, got := dialThrough(t, b); got != "b" {
		t.Fatalf("after a stopped listening, connection went to %q, want b", got)
	}
	if got := b.Current(); got != bsrv.addr() {
		t.Errorf("current server %s, want %s", got, bsrv.addr())
	}
	// It stays on b: a connection does not bounce back to a.
	if _, got := dialThrough(t, b); got != "b" {
		t.Errorf("next connection went to %q, want b", got)
	}
}

func TestHealthCheck(t *testing.T) {
	a, bsrv := startServer(t, "a"), startServer(t, "b")
	h := &health{down: map[string]bool{}}
	b := startBalancer(t, h, a.addr(), bsrv.addr())
	watch, got := dialThrough(t, b)
	if got != "a" {
		t.Fatalf("connection went to %q, want a", got)
	}
	h.set(a.addr(), true)
	b.checkAll(context.Background())
	if !closedByBalancer(watch) {
		t.Error("the connection forwarded to a failed server stayed open")
	}
	if _, got := dialThrough(t, b); got != "b" {
		t.Errorf("after a failed its check, connection went to %q, want b", got)
	}
	// a answering again does not move connections back while b answers.
	h.set(a.addr(), false)
	b.checkAll(context.Background())
	if _, got := dialThrough(t, b); got != "b" {
		t.Errorf("after a recovered, connection went to %q, want b (stay put)", got)
	}
}

// stillOpen tells whether c still reaches a server: the fake servers echo.
func stillOpen(c net.Conn) bool {
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

// A server cut from etcd quorum answers /readyz with 500: components must
// move to a ready server, not stay on it because it answers at all.
func TestNotReadyServerLosesItsConnections(t *testing.T) {
	a, bsrv := startServer(t, "a"), startServer(t, "b")
	h := &health{down: map[string]bool{}}
	b := startBalancer(t, h, a.addr(), bsrv.addr())
	watch, got := dialThrough(t, b)
	if got != "a" {
		t.Fatalf("connection went to %q, want a", got)
	}
	h.setNotReady(a.addr(), true)
	b.checkAll(context.Background())
	if !closedByBalancer(watch) {
		t.Error("the connection forwarded to a server that is not ready stayed open while b was ready")
	}
	if _, got := dialThrough(t, b); got != "b" {
		t.Errorf("after a became not ready, connection went to %q, want b", got)
	}
}

// When no server is ready, one that answers is still the best there is: its
// connections stay and new ones still reach it.
func TestNoServerReadyKeepsConnections(t *testing.T) {
	a, bsrv := startServer(t, "a"), startServer(t, "b")
	h := &health{down: map[string]bool{}}
	b := startBalancer(t, h, a.addr(), bsrv.addr())
	watch, got := dialThrough(t, b)
	if got != "a" {
		t.Fatalf("connection went to %q, want a", got)
	}
	h.setNotReady(a.addr(), true)
	h.setNotReady(bsrv.addr(), true)
	b.checkAll(context.Background())
	if !stillOpen(watch) {
		t.Error("with no server ready, the connection to a was closed")
	}
	if _, got := dialThrough(t, b); got == "" {
		t.Error("with no server ready, a new connection reached no server")
	}
	// b becomes ready: the connection to a moves off at the next check.
	h.setNotReady(bsrv.addr(), false)
	b.checkAll(context.Background())
	if !closedByBalancer(watch) {
		t.Error("the connection to a stayed open after b became ready")
	}
	if _, got := dialThrough(t, b); got != "b" {
		t.Errorf("after b became ready, connection went to %q, want b", got)
	}
}

func TestEveryServerDownStillTries(t *testing.T) {
	a := startServer(t, "a")
	h := &health{down: map[string]bool{a.addr(): true}}
	b := startBalancer(t, h, a.addr())
	b.checkAll(context.Background())
	if _, got := dialThrough(t, b); got != "a" {
		t.Errorf("with every check failing, connection went to %q, want a (dials still tried)", got)
	}
}

func TestSetServers(t *testing.T) {
	seed, c, d := startServer(t, "seed"), startServer(t, "c"), startServer(t, "d")
	b := startBalancer(t, &health{down: map[string]bool{}}, seed.addr())
	b.SetServers([]string{c.addr(), d.addr()})
	want := []string{c.addr(), d.addr(), seed.addr()}
	if got := b.Servers(); !slices.Equal(got, want) {
		t.Errorf("servers %v, want %v", got, want)
	}
	// The seed still answers, so new connections stay on it.
	if _, got := dialThrough(t, b); got != "seed" {
		t.Errorf("connection went to %q, want seed", got)
	}
	seed.l.Close()
	conn, got := dialThrough(t, b)
	if got != "c" {
		t.Fatalf("with the seed gone, connection went to %q, want c", got)
	}
	// c leaves the kubernetes Service: its connections close, d takes over.
	b.SetServers([]string{d.addr()})
	if !closedByBalancer(conn) {
		t.Error("the connection to a server that left the list stayed open")
	}
	if _, got := dialThrough(t, b); got != "d" {
		t.Errorf("connection went to %q, want d", got)
	}
	if got, want := b.Servers(), []string{d.addr(), seed.addr()}; !slices.Equal(got, want) {
		t.Errorf("servers %v, want %v (seeds are kept)", got, want)
	}
}

func TestServersFromSlices(t *testing.T) {
	tests := []struct {
		name  string
		slice discoveryv1.EndpointSlice
		want  []string
	}{{
		name: "ready and unknown readiness listed, not-ready left out",
		slice: discoveryv1.EndpointSlice{
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(6443))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{"10.0.0.1"}},
				{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			},
		},
		want: []string{"10.0.0.1:6443", "10.0.0.2:6443"},
	}, {
		name: "IPv6 in brackets",
		slice: discoveryv1.EndpointSlice{
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(6443))}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}},
		},
		want: []string{"[fd00::1]:6443"},
	}, {
		name:  "no port, no servers",
		slice: discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServersFromSlices([]*discoveryv1.EndpointSlice{&tc.slice}); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// failingListener fails its first Accept with errs, one each, then accepts.
type failingListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// Running out of file descriptors once must not end the balancer for good:
// the component would keep running with no way to the API.
func TestAcceptErrorIsRetried(t *testing.T) {
	a := startServer(t, "a")
	b, err := New(Config{Servers: []string{a.addr()}, Check: (&health{}).check, CheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b.listener = &failingListener{Listener: b.listener, errs: []error{
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)},
		&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	if _, got := dialThrough(t, b); got != "a" {
		t.Errorf("after failed accepts, connection went to %q, want a", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v, want nil when its context ends", err)
	}
}

// A single failed dial to a server must not cut the watches already open to
// it: only its health check decides that.
func TestFailedDialKeepsOpenConnections(t *testing.T) {
	a, bsrv := startServer(t, "a"), startServer(t, "b")
	var mu sync.Mutex
	failA := false
	d := &net.Dialer{}
	b, err := New(Config{
		Servers:       []string{a.addr(), bsrv.addr()},
		Check:         (&health{}).check,
		CheckInterval: time.Hour,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			mu.Lock()
			fail := failA && address == a.addr()
			failA = failA && !fail
			mu.Unlock()
			if fail {
				return nil, errors.New("dial timeout")
			}
			return d.DialContext(ctx, network, address)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	watch, got := dialThrough(t, b)
	if got != "a" {
		t.Fatalf("connection went to %q, want a", got)
	}
	mu.Lock()
	failA = true
	mu.Unlock()
	if _, got := dialThrough(t, b); got != "b" {
		t.Errorf("with a dial to a failing, connection went to %q, want b", got)
	}
	if !stillOpen(watch) {
		t.Error("one failed dial to a closed the connection already open to it")
	}
}
