package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/bench/internal/host"
	"portal.dev/portal/bench/internal/node"
)

// scaleNS holds the scale run's Services and Ingresses.
const scaleNS = "scale"

// scaleBench is one scale run: the client, the ingress process under test
// and the HTTP client that asks it.
type scaleBench struct {
	client   kubernetes.Interface
	addr     string // the ingress's HTTP address
	backends [2]string
	port     int32
	http     *http.Client
	// moved are the Services whose endpoint is backends[1].
	moved map[int]bool
}

// current is the address Service i's endpoint has now.
func (b *scaleBench) current(i int) string {
	if b.moved[i] {
		return b.backends[1]
	}
	return b.backends[0]
}

// scale fills the API with n Ingresses of two paths (Prefix /a and Exact
// /b of host iN.bench.local, to Service sN with one endpoint), starts
// `portal ingress`, and times changes until the first request that the
// new rule or endpoint serves.
func scale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	ingressCmd := fs.String("ingress-cmd", "bin/portal ingress", "the ingress command, without its flags (space-separated)")
	core := fs.String("core", "0", "CPU the ingress is pinned to")
	logFile := fs.String("log", "/dev/null", "the ingress's log")
	backend := fs.String("backend", "10.244.0.10:8080", "the endpoint of every Service")
	backend2 := fs.String("backend2", "10.244.0.11:8080", "the endpoint the endpoint changes move a Service to (same port)")
	n := fs.Int("ingresses", 1000, "Ingresses (and Services)")
	changes := fs.Int("changes", 100, "Ingress changes and endpoint changes to time")
	httpPort := fs.Int("http-port", 18080, "the ingress's HTTP port")
	fs.Parse(args)

	client, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	ip, port, err := splitAddr(*backend)
	if err != nil {
		return err
	}
	ip2, _, err := splitAddr(*backend2)
	if err != nil {
		return err
	}
	b := &scaleBench{
		client: client, addr: fmt.Sprintf("127.0.0.1:%d", *httpPort), backends: [2]string{ip, ip2}, port: port,
		moved: map[int]bool{},
		http:  &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}},
	}
	ctx := context.Background()
	// The throughput runs' Ingress routes every host; the changes need
	// hosts that only their own Ingress routes.
	if err := client.NetworkingV1().Ingresses("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := ensureClass(ctx, client); err != nil {
		return err
	}
	start := time.Now()
	if err := b.fill(ctx, *n); err != nil {
		return err
	}
	fmt.Printf("RESULT scale filled ingresses=%d paths=%d in=%.1fs\n", *n, 2**n, time.Since(start).Seconds())

	cmd, err := startIngress(strings.Fields(*ingressCmd), *core, *kubeconfig, *logFile, *httpPort)
	if err != nil {
		return err
	}
	defer node.Stop(cmd)
	pid := cmd.Process.Pid
	started := time.Now()
	for _, i := range []int{0, *n - 1} {
		if err := b.waitBody(hostName(i), "/a/who", ip, 120*time.Second); err != nil {
			return err
		}
	}
	fmt.Printf("RESULT scale first-served all=%.2fs %s\n", time.Since(started).Seconds(), rss(pid))

	ingressTimes, err := b.ingressChanges(ctx, *n, *changes)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT scale ingress-change %s\n", quantiles(ingressTimes))
	endpointTimes, err := b.endpointChanges(ctx, *n, *changes)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT scale endpoint-change %s\n", quantiles(endpointTimes))
	fmt.Printf("RESULT scale after-changes %s cpu=%.2fs\n", rss(pid), host.CPU(pid).Seconds())
	return nil
}

// fill creates n Services with their slices and n Ingresses, 32 at once.
func (b *scaleBench) fill(ctx context.Context, n int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNS}}
	if _, err := b.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", scaleNS, err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			if err := createService(ctx, b.client, scaleNS, svcName(i), b.backends[0], b.port); err != nil {
				return err
			}
			ing := newIngress(scaleNS, fmt.Sprintf("i%d", i), hostName(i), svcName(i),
				pathRule("/a", networkingv1.PathTypePrefix), pathRule("/b", networkingv1.PathTypeExact))
			_, err := b.client.NetworkingV1().Ingresses(scaleNS).Create(ctx, ing, metav1.CreateOptions{})
			return err
		})
	}
	return g.Wait()
}

// ingressChanges adds, one change at a time, a Prefix path /cK to an
// Ingress spread over the n, and times from the update request until the
// ingress first serves /cK/who from the backend.
func (b *scaleBench) ingressChanges(ctx context.Context, n, changes int) ([]time.Duration, error) {
	var out []time.Duration
	for k := range changes {
		i := (k * 7919) % n
		ings := b.client.NetworkingV1().Ingresses(scaleNS)
		ing, err := ings.Get(ctx, fmt.Sprintf("i%d", i), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		path := fmt.Sprintf("/c%d", k)
		p := pathRule(path, networkingv1.PathTypePrefix)
		p.Backend = serviceBackend(svcName(i))
		ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, p)
		// No rule may serve the path yet.
		if code, _, err := b.get(hostName(i), path+"/who"); err != nil || code != http.StatusNotFound {
			return nil, fmt.Errorf("%s%s/who before the change: status %d, %v; want 404", hostName(i), path, code, err)
		}
		t := time.Now()
		if _, err := ings.Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		if err := b.waitBody(hostName(i), path+"/who", b.current(i), 10*time.Second); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// endpointChanges moves, one change at a time, a Service's only endpoint
// between the two backend addresses, and times from the slice update
// until a request through the Ingress is first answered by the new one.
func (b *scaleBench) endpointChanges(ctx context.Context, n, changes int) ([]time.Duration, error) {
	var out []time.Duration
	for k := range changes {
		i := (k * 104729) % n
		b.moved[i] = !b.moved[i]
		to := b.current(i)
		s := slice(scaleNS, svcName(i), to, b.port)
		t := time.Now()
		if _, err := b.client.DiscoveryV1().EndpointSlices(scaleNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		if err := b.waitBody(hostName(i), "/a/who", to, 10*time.Second); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// get asks the ingress for path on host and returns the status and body.
func (b *scaleBench) get(hostname, path string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+b.addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = hostname
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// waitStatus asks until the answer has status code; the asking is the
// measurement, so there is no pause between requests.
func (b *scaleBench) waitStatus(hostname, path string, code int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, _, err := b.get(hostname, path)
		if err == nil && got == code {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s%s: status %d, %v after %v; want %d", hostname, path, got, err, timeout, code)
		}
	}
}

// waitBody asks until the answer is 200 with body want.
func (b *scaleBench) waitBody(hostname, path, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := b.get(hostname, path)
		if err == nil && code == http.StatusOK && body == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s%s: status %d, body %q, %v after %v; want 200 %q", hostname, path, code, body, err, timeout, want)
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // not up yet
		}
	}
}

// startIngress starts the ingress command pinned to core, serving HTTP on
// httpPort (HTTPS one above).
func startIngress(command []string, core, kubeconfig, logFile string, httpPort int) (*exec.Cmd, error) {
	log, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	args := append([]string{"-c", core}, command...)
	args = append(args, "--kubeconfig", kubeconfig, "--http-port", strconv.Itoa(httpPort),
		"--https-port", strconv.Itoa(httpPort+1), "--metrics-bind-address", "127.0.0.1:10355")
	cmd := exec.Command("taskset", args...)
	cmd.Stdout, cmd.Stderr = log, log
	// taskset execs the ingress, so the PID is the ingress's own.
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// rss is the process's resident memory: total, anonymous and file-backed.
func rss(pid int) string {
	m := host.MiB(pid, "status")
	return fmt.Sprintf("rss_mib=%.0f anon_mib=%.0f file_mib=%.0f", m["VmRSS"], m["RssAnon"], m["RssFile"])
}

// quantiles is the p50, p90, p99 and max of ds, in ms.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) float64 {
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	return fmt.Sprintf("n=%d p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f max_ms=%.1f", len(s), q(0.5), q(0.9), q(0.99), q(1))
}

func hostName(i int) string { return fmt.Sprintf("i%d.bench.local", i) }
func svcName(i int) string  { return fmt.Sprintf("s%d", i) }

// splitAddr splits "10.0.0.1:8080".
func splitAddr(addr string) (string, int32, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseInt(p, 10, 32)
	return h, int32(port), err
}
