package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/healthz"

	"portal.dev/portal/apiserver"
	"portal.dev/portal/controller/manager"
	"portal.dev/portal/dns"
	"portal.dev/portal/ingress"
	"portal.dev/portal/proxy"
	"portal.dev/portal/proxy/leftovers"
)

// leakTestServer is `portal server` in this process on free loopback
// ports: API server with embedded etcd, controllers, DNS and the
// userspace proxy. The agent is left out: it needs root and a network of
// its own.
func leakTestServer(t *testing.T) (serverOptions, func(string) bool) {
	t.Helper()
	o := apiserver.DefaultOptions()
	o.DataDir = t.TempDir()
	o.BindAddress = net.IPv4(127, 0, 0, 1)
	ports := freePorts(t, 3)
	o.SecurePort = ports[0]
	// The embedded etcd would pick its own free ports, possibly the one
	// just chosen for the API: give it the other two (its etcd-ports file).
	etcdPorts := fmt.Sprintln(ports[1], ports[2])
	if err := os.WriteFile(filepath.Join(o.DataDir, "etcd-ports"), []byte(etcdPorts), 0o644); err != nil {
		t.Fatal(err)
	}
	// Published as the kubernetes Service's endpoint, never dialled here.
	o.AdvertiseAddress = net.ParseIP("192.0.2.10")
	mo := manager.DefaultOptions()
	mo.Identity = "leak-test"
	do := dns.DefaultOptions()
	do.Port, do.HealthBindAddress, do.ReadyBindAddress, do.MetricsBindAddress = 0, "", "", ""
	do.Upstream = []string{"127.0.0.1:1"}
	po := proxy.DefaultOptions()
	po.Mode, po.MinSyncPeriod = proxy.ModeUserspace, proxy.DefaultMinSyncPeriod(proxy.ModeUserspace)
	po.NodePortAddresses = []string{"127.0.0.0/8"}
	removeVIPLinkAfter(t)
	po.HostnameOverride, po.HealthzBindAddress, po.MetricsBindAddress = "leak-test", "", ""
	ino := ingress.DefaultOptions()
	ingressPorts := freePorts(t, 2)
	ino.BindAddress, ino.HTTPPort, ino.HTTPSPort, ino.MetricsBindAddress = "127.0.0.1", ingressPorts[0], ingressPorts[1], "127.0.0.1:0"
	so := serverOptions{api: o, controllers: mo, dns: do, proxy: po, ingress: ino}
	return so, func(c string) bool { return c != "agent" }
}

// removeVIPLinkAfter removes, when t ends, the link on which the
// userspace proxy puts Service addresses as root, unless it was there
// before: these tests run in the host's network namespace.
func removeVIPLinkAfter(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		return // without root the proxy adds no link
	}
	if err := exec.Command("ip", "link", "show", leftovers.VIPLink).Run(); err == nil {
		return // not ours
	}
	t.Cleanup(func() {
		if err := leftovers.DeleteVIPLink(context.Background(), nil); err != nil {
			t.Errorf("remove the proxy's link: %v", err)
		}
	})
}

// freePorts returns n distinct free loopback TCP ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// waitReady waits until the server's /readyz answers ok, that is until
// every component has started and synced.
func waitReady(t *testing.T, ctx context.Context, port int, errc <-chan error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: true,
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-errc:
			return false, fmt.Errorf("server stopped before it was ready: %v", err)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// When ctx ends, `portal server` stops every component and returns with
// no goroutine of theirs left running.
func TestServerStopLeavesNoGoroutine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole server")
	}
	defer goleak.VerifyNone(t, ignoreLibraryGoroutines()...)
	so, enabled := leakTestServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runServer(ctx, so, enabled) }()
	waitReady(t, ctx, so.api.SecurePort, errc)
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("runServer after its context ended: %v, want nil", err)
	}
}

// When one component fails (here the DNS, its port taken), `portal
// server` returns that error once every other component has stopped.
func TestServerFailureLeavesNoGoroutine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole server")
	}
	defer goleak.VerifyNone(t, ignoreLibraryGoroutines()...)
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	so, enabled := leakTestServer(t)
	so.dns.Port = taken.LocalAddr().(*net.UDPAddr).Port
	err = runServer(context.Background(), so, enabled)
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("runServer with the DNS port taken: %v, want the DNS's error", err)
	}
}

// When a component fails once the server runs, `portal server` returns
// its error once every other component has stopped.
func TestServerLateFailureLeavesNoGoroutine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole server")
	}
	defer goleak.VerifyNone(t, ignoreLibraryGoroutines()...)
	so, _ := leakTestServer(t)
	errFailed := errors.New("component failed")
	fail := make(chan struct{})
	failing := func(s *stages, _ serverOptions, _ *apiserver.Options) error {
		s.run(nodeStage, func(ctx context.Context) error {
			select {
			case <-fail:
				return errFailed
			case <-ctx.Done():
				return nil
			}
		})
		return nil
	}
	start := []starter{startDNS, startProxy, startControllers, failing}
	errc := make(chan error, 1)
	go func() { errc <- runComponents(context.Background(), so, start) }()
	waitReady(t, context.Background(), so.api.SecurePort, errc)
	close(fail)
	if err := <-errc; !errors.Is(err, errFailed) {
		t.Errorf("runServer after a component failed: %v, want %v", err, errFailed)
	}
}

// ignoreLibraryGoroutines are the goleak options of these tests: the
// goroutines running before the test, and those of libraries the server
// uses that nothing can stop, each with the reason.
func ignoreLibraryGoroutines() []goleak.Option {
	// k8s.io/apiserver's /healthz "log" check starts, once per process,
	// a klog flush loop that runs forever; start it now so that it is
	// one of the goroutines already running.
	healthz.LogHealthz.Check(nil)
	return []goleak.Option{
		goleak.IgnoreCurrent(),
		// The watch cache wakes a reader waiting for a fresh enough
		// revision from a goroutine that sleeps out the reader's time
		// limit (3s) whether or not the reader is still waiting; it
		// takes no context and ends by itself.
		goleak.IgnoreTopFunction("k8s.io/apiserver/pkg/storage/cacher.(*watchCache).waitUntilFreshLocked.func2"),
	}
}

// A port the Ingress controller cannot bind (80 for a user without root)
// leaves the controller out; the server becomes ready and runs the rest.
func TestServerIngressPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole server")
	}
	defer goleak.VerifyNone(t, ignoreLibraryGoroutines()...)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	so, enabled := leakTestServer(t)
	so.ingress.HTTPPort = taken.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runServer(ctx, so, enabled) }()
	waitReady(t, ctx, so.api.SecurePort, errc)
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("runServer after its context ended: %v, want nil", err)
	}
}
