//go:build linux

package agent

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestDiagRoutes: what portal explain asks of an agent through
// nodes/NAME/proxy. A running pod at 127.0.0.1 stands in for the node's
// pods; 127.0.0.2 is a pod that is not up, 127.0.0.3 a hostNetwork pod.
func TestDiagRoutes(t *testing.T) {
	listening, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listening.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"path":"`+r.URL.Path+`"}`)
	}))
	defer proxy.Close()
	// The node's Ingress controller: it says which host and path it got.
	ingress := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, r.Method+" "+r.Host+r.URL.Path)
	}))
	defer ingress.Close()
	ingressAddr := strings.TrimPrefix(ingress.URL, "http://")

	tests := []struct {
		name       string
		proxyAddr  string
		path       string
		wantCode   int
		wantInBody string
	}{
		{"a listening pod port is open", "", "/dial?address=" + listening.Addr().String(), 200, `"result":"open"`},
		{"a closed pod port is refused", "", "/dial?address=" + closedAddr, 200, `"result":"refused"`},
		{"an address outside the pod CIDRs is not dialed", "", "/dial?address=192.0.2.1:80", 403, "is not the address of a running pod of node node1"},
		// Regression: the pod CIDR's gateway is the node's bridge, so dialing it
		// reached the node's own sockets (etcd, the API server).
		{"the pod CIDR's gateway is not dialed", "", "/dial?address=10.244.1.1:2379", 403, "is not the address of a running pod"},
		{"an unallocated pod CIDR address is not dialed", "", "/dial?address=10.244.1.9:80", 403, "is not the address of a running pod"},
		{"a pod whose sandbox is down is not dialed", "", "/dial?address=127.0.0.2:80", 403, "is not the address of a running pod"},
		{"a hostNetwork pod's node address is not dialed", "", "/dial?address=127.0.0.3:80", 403, "is not the address of a running pod"},
		{"garbage is refused", "", "/dial?address=web", 400, "want IP:PORT"},
		{"a DNS question without a type is refused", "", "/dnsquery?name=web.default.svc.cluster.local", 400, "want name=NAME&type=N"},
		{"no cluster DNS configured", "", "/dnsquery?name=web.default.svc.cluster.local&type=1", 404, "has no --cluster-dns"},
		{"the proxy's status is forwarded", strings.TrimPrefix(proxy.URL, "http://"), "/proxystatus/services/default/web", 200, `"path":"/status/services/default/web"`},
		{"a proxy that does not answer says so", closedAddr, "/proxystatus/services/default/web", 502, "the service proxy of node node1 does not answer at " + closedAddr},
		{"no proxy address configured", "", "/proxystatus/services/default/web", 404, "no --proxy-status-address"},
		{"a request through the node's Ingress controller", "", "/httpprobe?scheme=http&host=web.example&path=/api", 200, `"status":503,"body":"GET web.example/api"`},
		{"scheme and path default to http and /", "", "/httpprobe?host=web.example", 200, `"address":"` + ingressAddr + `","status":503,"body":"GET web.example/"`},
		{"no Ingress controller on the scheme asked", "", "/httpprobe?scheme=https&host=web.example&path=/", 404, "no Ingress controller known on node node1 for https"},
		// The caller chooses the Host header, never the address dialed.
		{"a host with a port is refused", "", "/httpprobe?host=10.0.0.1:2379&path=/", 400, "want a DNS name or an IP address"},
		{"a path that is a URL is refused", "", "/httpprobe?host=web.example&path=http://10.0.0.1:2379/", 400, "want an absolute path"},
		{"another scheme is refused", "", "/httpprobe?scheme=file&path=/etc/passwd", 400, "want http or https"},
		{"the proxy's counters are forwarded", strings.TrimPrefix(proxy.URL, "http://"), "/proxystatus/traffic", 200, `"path":"/status/traffic"`},
		{"counters of a proxy that does not answer", closedAddr, "/proxystatus/traffic", 502, "the service proxy of node node1 does not answer at " + closedAddr},
		{"no Ingress controller configured", "", "/ingressstatus/backends", 404, "no --ingress-status-address"},
		{"the Ingress controller's counters are forwarded", strings.TrimPrefix(proxy.URL, "http://"), "/ingressstatus/backends", 200, `"path":"/status/backends"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{opts: Options{NodeName: "node1", ProxyStatusAddress: tc.proxyAddr, IngressHTTPAddress: ingressAddr, IngressStatusAddress: tc.proxyAddr}, workers: map[types.UID]*podWorker{
				"up":   {targets: &podTargets{up: true, ips: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}},
				"down": {targets: &podTargets{ips: []netip.Addr{netip.MustParseAddr("127.0.0.2")}}},
				"host": {targets: &podTargets{up: true}},
				"new":  {},
			}}
			mux := http.NewServeMux()
			a.addDiagRoutes(mux)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantInBody) {
				t.Errorf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantInBody)
			}
		})
	}
}

// TestDiagForwardIgnoresEnvironmentProxy: the forwarders used Go's default
// transport, which sends through HTTP_PROXY to any address but a loopback
// IP or "localhost"; a status address such as 0.0.0.0:10249 (the proxy's
// own bind address, copied) then went to the proxy, which answered for
// its own host or not at all. They ask this node's components directly.
//
// Go reads the proxy environment once per process, at the first request
// through http.ProxyFromEnvironment, so setting HTTP_PROXY here would
// change nothing once another test of the package has sent one. The
// forward runs instead in a child process of this test binary that starts
// with HTTP_PROXY set (diagProxyChild).
func TestDiagForwardIgnoresEnvironmentProxy(t *testing.T) {
	if os.Getenv(diagProxyChildEnv) != "" {
		diagProxyChild(t)
		return
	}
	var proxied atomic.Int32
	envProxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		io.WriteString(w, "the environment's proxy")
	}))
	defer envProxy.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiagForwardIgnoresEnvironmentProxy$", "-test.count=1", "-test.v")
	cmd.Env = append(withoutProxyEnv(os.Environ()), diagProxyChildEnv+"=1",
		"HTTP_PROXY="+envProxy.URL, "http_proxy="+envProxy.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the forward with HTTP_PROXY set, in a child process: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestDiagForwardIgnoresEnvironmentProxy") {
		t.Fatalf("the child process ran no forward:\n%s", out)
	}
	if n := proxied.Load(); n != 0 {
		t.Errorf("got %d requests through HTTP_PROXY, want 0", n)
	}
}

// diagProxyChildEnv marks the child process of
// TestDiagForwardIgnoresEnvironmentProxy.
const diagProxyChildEnv = "PORTAL_TEST_DIAG_PROXY_CHILD"

// diagProxyChild is TestDiagForwardIgnoresEnvironmentProxy in its child
// process, where HTTP_PROXY names the parent's stand-in proxy: the agent
// forwards to this node's proxy at 0.0.0.0, an address Go would send
// through HTTP_PROXY.
func diagProxyChild(t *testing.T) {
	status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "this node's proxy")
	}))
	defer status.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(status.URL, "http://"))

	a := &Agent{opts: Options{NodeName: "node1", ProxyStatusAddress: net.JoinHostPort("0.0.0.0", port)}}
	mux := http.NewServeMux()
	a.addDiagRoutes(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/proxystatus/traffic", nil))
	if got, want := rec.Body.String(), "this node's proxy"; rec.Code != http.StatusOK || got != want {
		t.Errorf("got %d %q, want 200 %q", rec.Code, got, want)
	}
}

// withoutProxyEnv is env without the proxy variables, so that a NO_PROXY
// of the machine's cannot exempt the child's request from HTTP_PROXY.
func withoutProxyEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "REQUEST_METHOD":
			return true
		}
		return false
	})
}
