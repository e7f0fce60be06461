package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// haWorkerPodCIDR is the worker's pod range, apart from the bed's LAN and
// from the Service range (10.96.0.0/12).
const haWorkerPodCIDR = "10.244.1.0/24"

// haWorker is the bed's worker node and its client. The worker runs
// `portal agent` and `portal proxy` on their own, each reaching every
// server through its load balancer (--server names them all), and the
// agent runs two web pods behind the NodePort Service default/web. The
// client is a namespace of its own on the LAN that routes the Service range
// through the worker, as a router in front of a cluster would, so it
// reaches web both by its ClusterIP and by the worker's NodePort.
type haWorker struct {
	Name string
	IP   string
	NS   *testbed.NS
	// Client is the namespace the load runs from.
	Client *testbed.NS
	// ClusterIP and NodePort are web's addresses as host:port.
	ClusterIP, NodePort string

	t       *testing.T
	first   *haNode
	servers string // every server's URL, comma-separated
	logs    string
}

// AddWorker adds the worker and its client to a bed whose servers run,
// starts web's pods on it and returns once the client reaches web both
// ways.
func (b *haBed) AddWorker() *haWorker {
	b.t.Helper()
	t := b.t
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the worker's pods need python3 (./hack/deps.sh installs it)")
	}
	began := time.Now()
	ns, ip := b.Attach("w1")
	var urls []string
	for _, n := range b.Nodes {
		if n.Server != nil {
			urls = append(urls, n.URL())
		}
	}
	first := b.Nodes[0]
	w := &haWorker{Name: "w1", IP: ip, NS: ns, t: t, first: first, servers: strings.Join(urls, ","), logs: t.TempDir()}
	root := filepath.Join(t.TempDir(), "agent")
	// Registered after the bed's cleanup, so it runs first: pod processes
	// live in namespaces of their own, out of the bed's reach.
	t.Cleanup(func() { agent.KillPods(root) })
	w.start("agent", "system:node:w1", "--hostname-override", w.Name, "--node-ip", ip, "--pod-cidr", haWorkerPodCIDR,
		"--cluster-cidr", "10.244.0.0/16", "--root-dir", root)
	w.start("proxy", "system:kube-proxy", "--hostname-override", w.Name, "--proxy-mode", "nftables", "--cluster-cidr", "10.244.0.0/16")

	c := b.clientAt(first, first)
	ctx := context.Background()
	www := t.TempDir()
	for i := range 2 {
		name := fmt.Sprintf("web-%d", i)
		dir := filepath.Join(www, name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "index.html"), []byte(name), 0o644)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
			NodeName: w.Name,
			Containers: []corev1.Container{{Name: "web", Image: "python:3", WorkingDir: dir,
				Command: []string{"python3", "-m", "http.server", "8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}}}}}
		if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	svc, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.ClusterIP = hostPort(svc.Spec.ClusterIP, 80)
	w.NodePort = hostPort(ip, svc.Spec.Ports[0].NodePort)

	// Until the worker's proxy has web's rules, it forwards the client's
	// packets for the ClusterIP out to the LAN's gateway, which has no
	// route for them: it sends an ICMP redirect, which a host heeds for
	// the next 5 minutes, and leaves a connection-tracking entry without
	// address translation, which a later connection from the same port
	// would follow for 2 minutes. The client sends nothing there before.
	eventuallyWithin(t, 90*time.Second, "the worker's proxy has web's ClusterIP", func() (bool, string) {
		out, err := ns.Run("nft", "get", "element", "ip", "portal", "service-ips",
			fmt.Sprintf("{ %s . tcp . 80 }", svc.Spec.ClusterIP))
		return err == nil, out
	})
	w.Client, _ = b.Attach("c1")
	// A new namespace takes its IPv4 settings from the machine's: where
	// forwarding is off there, the client heeds redirects, which a
	// router does not.
	w.Client.MustRun("sysctl", "-q", "-w", "net.ipv4.conf.all.accept_redirects=0", "net.ipv4.conf.eth0.accept_redirects=0")
	w.Client.MustRun("ip", "route", "add", "10.96.0.0/12", "via", ip)
	for _, addr := range []string{w.ClusterIP, w.NodePort} {
		eventuallyWithin(t, 90*time.Second, "the client reaches web at "+addr, func() (bool, string) {
			err := w.get(context.Background(), addr)
			return err == nil, fmt.Sprint(err)
		})
	}
	t.Logf("worker %s serves web through its ClusterIP and NodePort %v after it was added", w.Name, time.Since(began).Round(100*time.Millisecond))
	return w
}

// start runs `portal NAME` on the worker as user, with a kubeconfig for
// the first server and --server naming every server.
func (w *haWorker) start(name, user string, args ...string) {
	w.t.Helper()
	log, err := os.Create(filepath.Join(w.logs, name+".log"))
	if err != nil {
		w.t.Fatal(err)
	}
	logAgentOnFailure(w.t, "the worker's "+name+" log", log.Name(), 30)
	kc := w.first.Server.UserKubeconfig(w.t, user, w.first.URL())
	w.NS.Start(log, framework.Binary(w.t), append([]string{name, "--kubeconfig", kc, "--server", w.servers, "-v=2"}, args...)...)
}

// StartDNS runs `portal dns` on the worker, answering on its address,
// port 53, and returns that address.
func (w *haWorker) StartDNS() string {
	w.t.Helper()
	w.start("dns", "system:kube-dns", "--dns-bind-address", w.IP, "--dns-port", "53", "--upstream", "none")
	return w.IP + ":53"
}

// get asks web at addr, from the client, for its page over a connection of
// its own.
func (w *haWorker) get(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: w.Client.DialContext, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "web-") {
		return fmt.Errorf("%s: %.40q", resp.Status, body)
	}
	return nil
}

// StartLoad starts the client's requests to web through the ClusterIP and
// the NodePort, and more checks, one of each every 100 ms, until the probe
// is stopped.
func (w *haWorker) StartLoad(more ...probeCheck) *dataPlaneProbe {
	return startProbe(append([]probeCheck{
		{"ClusterIP", func(ctx context.Context) error { return w.get(ctx, w.ClusterIP) }},
		{"NodePort", func(ctx context.Context) error { return w.get(ctx, w.NodePort) }},
	}, more...)...)
}

// probeCheck is one kind of request a dataPlaneProbe sends.
type probeCheck struct {
	name string
	do   func(ctx context.Context) error
}

// dataPlaneProbe sends each of its checks once per round, a round every
// 100 ms, and counts each check's requests and failures.
type dataPlaneProbe struct {
	checks []probeCheck
	cancel context.CancelFunc
	done   chan struct{}

	mu           sync.Mutex
	sent, failed map[string]int
	firstFailure map[string]string
}

// startProbe starts sending checks until Stop.
func startProbe(checks ...probeCheck) *dataPlaneProbe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &dataPlaneProbe{checks: checks, cancel: cancel, done: make(chan struct{}),
		sent: map[string]int{}, failed: map[string]int{}, firstFailure: map[string]string{}}
	go p.run(ctx)
	return p
}

func (p *dataPlaneProbe) run(ctx context.Context) {
	defer close(p.done)
	errs := make([]error, len(p.checks))
	for ctx.Err() == nil {
		for i, c := range p.checks {
			errs[i] = c.do(ctx)
		}
		if ctx.Err() != nil {
			return // the probe's end cut the last round short
		}
		for i, c := range p.checks {
			p.record(c.name, errs[i])
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *dataPlaneProbe) record(kind string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent[kind]++
	if err != nil {
		p.failed[kind]++
		if p.firstFailure[kind] == "" {
			p.firstFailure[kind] = fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err)
		}
	}
}

// Stop stops the probe and waits for its last round; stopping twice is
// fine.
func (p *dataPlaneProbe) Stop() {
	p.cancel()
	<-p.done
}

// CheckNoFailures stops the probe, logs each check's figures, and fails
// the test unless every check sent at least minEach requests and none
// failed.
func (p *dataPlaneProbe) CheckNoFailures(t *testing.T, minEach int) {
	t.Helper()
	p.Stop()
	for _, c := range p.checks {
		sent, failed := p.sent[c.name], p.failed[c.name]
		t.Logf("%s: %d requests, %d failed", c.name, sent, failed)
		if failed > 0 || sent < minEach {
			t.Errorf("%s: %d of %d requests failed (first: %s), want 0 of at least %d", c.name, failed, sent, p.firstFailure[c.name], minEach)
		}
	}
}
