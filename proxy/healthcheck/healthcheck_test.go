package healthcheck

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// pipeListener is an in-memory listener: tests dial it through net.Pipe,
// so no socket is opened.
type pipeListener struct {
	addr  string
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.addr) }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

type pipeNet struct {
	mu        sync.Mutex
	listeners map[string]*pipeListener
}

func (n *pipeNet) listen(_, addr string) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.listeners[addr]; ok {
		select {
		case <-l.done:
		default:
			return nil, errors.New("address in use")
		}
	}
	l := &pipeListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

func (n *pipeNet) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		n.mu.Lock()
		l, ok := n.listeners[addr]
		n.mu.Unlock()
		if !ok {
			return nil, errors.New("connection refused")
		}
		c1, c2 := net.Pipe()
		select {
		case l.conns <- c2:
			return c1, nil
		case <-l.done:
			return nil, errors.New("connection refused")
		}
	}, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestServiceServers(t *testing.T) {
	pn := &pipeNet{listeners: map[string]*pipeListener{}}
	var unhealthy atomic.Bool
	s := NewServiceServers(nil, func() bool { return !unhealthy.Load() }, pn.listen)
	defer s.Close()
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	c := pn.client()

	if err := s.Sync(map[types.NamespacedName]Want{web: {Port: 32000, LocalEndpoints: 0}}); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, c, "http://:32000/anything")
	if code != 503 || body != `{"service":{"namespace":"default","name":"web"},"localEndpoints":0,"serviceProxyHealthy":true}` {
		t.Errorf("no local endpoints: got %d %s", code, body)
	}

	s.Sync(map[types.NamespacedName]Want{web: {Port: 32000, LocalEndpoints: 2}})
	code, body = get(t, c, "http://:32000/")
	if code != 200 || body != `{"service":{"namespace":"default","name":"web"},"localEndpoints":2,"serviceProxyHealthy":true}` {
		t.Errorf("two local endpoints: got %d %s", code, body)
	}

	unhealthy.Store(true)
	code, body = get(t, c, "http://:32000/healthz")
	if code != 503 || !strings.Contains(body, `"serviceProxyHealthy":false`) {
		t.Errorf("proxy unhealthy: got %d %s", code, body)
	}
	unhealthy.Store(false)

	// The port moves: the old one closes, the new one opens.
	s.Sync(map[types.NamespacedName]Want{web: {Port: 32001, LocalEndpoints: 1}})
	if code, _ := get(t, c, "http://:32000/"); code != 0 {
		t.Errorf("old port still answers: %d", code)
	}
	if code, _ := get(t, c, "http://:32001/"); code != 200 {
		t.Errorf("new port: got %d", code)
	}
	// The Service goes: its server closes.
	s.Sync(nil)
	if code, _ := get(t, c, "http://:32001/"); code != 0 {
		t.Errorf("closed server answers: %d", code)
	}
	if got := s.Ports(); len(got) != 0 {
		t.Errorf("Ports after removal: %v", got)
	}
}

func TestServiceServersReportPortInUseAndRetry(t *testing.T) {
	pn := &pipeNet{listeners: map[string]*pipeListener{}}
	blocker, _ := pn.listen("tcp", ":32000")
	s := NewServiceServers(nil, nil, pn.listen)
	defer s.Close()
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	if err := s.Sync(map[types.NamespacedName]Want{web: {Port: 32000, LocalEndpoints: 1}}); err == nil {
		t.Fatal("want an error for a port in use")
	}
	blocker.Close()
	if err := s.Sync(map[types.NamespacedName]Want{web: {Port: 32000, LocalEndpoints: 1}}); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func TestProxyHealth(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewProxyHealth(time.Minute, func() time.Time { return now })
	var responses []string
	h.OnResponse = func(path string, code int) { responses = append(responses, path+" "+http.StatusText(code)) }
	srv := h.Handler()
	do := func(path string) int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	if do("/healthz") != 200 || do("/livez") != 200 {
		t.Error("a fresh proxy with nothing queued is healthy")
	}
	h.QueuedUpdate()
	now = now.Add(30 * time.Second)
	if do("/healthz") != 200 {
		t.Error("an update queued for less than the timeout is fine")
	}
	now = now.Add(31 * time.Second)
	if do("/healthz") != 503 || do("/livez") != 503 {
		t.Error("an update queued past the timeout is unhealthy")
	}
	h.Updated()
	if do("/healthz") != 200 {
		t.Error("healthy again after a sync")
	}
	h.SetNodeEligible(false)
	if do("/healthz") != 503 || do("/livez") != 200 {
		t.Error("a node being deleted fails /healthz only")
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if !strings.Contains(rec.Body.String(), `"nodeEligible": false`) || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("healthz body: %s", rec.Body.String())
	}
	if len(responses) == 0 || responses[0] != "/healthz OK" {
		t.Errorf("OnResponse: got %v", responses)
	}
}
