// Command controllers benchmarks the EndpointSlice controller at scale:
// with N Services and M ready Pods it measures the time from a Pod's
// status change to its slice being written, the time a restarted
// controller-manager takes to catch up, and the controller-manager's RSS.
//
// It runs `portal server --disable controllers` and a separate
// `portal controller-manager`, both pinned to one core; the load runs on
// the other (see run.sh).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

var (
	portal   = flag.String("portal", "bin/portal", "portal binary")
	core     = flag.String("server-core", "0", "CPU for the server and the controller-manager")
	services = flag.Int("services", 1000, "Services")
	podsPer  = flag.Int("pods-per-service", 10, "ready Pods per Service")
	flips    = flag.Int("flips", 200, "readiness changes to time")
	keep     = flag.Bool("keep", false, "keep the data directory and logs")
	hold     = flag.Duration("hold", 0, "keep the server running this long after the runs, to look at it")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func start(log string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command("taskset", append([]string{"-c", *core, *portal}, args...)...)
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}

func run() error {
	dir, err := os.MkdirTemp("", "portal-bench-ctrl-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Println("# data and logs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	srv, err := start(filepath.Join(dir, "server.log"), "server", "--data-dir", dir, "--secure-port", "16998",
		"--disable", "controllers")
	if err != nil {
		return err
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := waitReady("https://127.0.0.1:16998/readyz"); err != nil {
		return err
	}
	kc := filepath.Join(dir, "cm.kubeconfig")
	if out, err := exec.Command(*portal, "kubeconfig", "--data-dir", dir, "--user", "system:kube-controller-manager",
		"--server", "https://127.0.0.1:16998", "-o", kc).CombinedOutput(); err != nil {
		return fmt.Errorf("kubeconfig: %v: %s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = runtime.ContentTypeProtobuf
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	t0 := time.Now()
	pods, err := populate(ctx, client)
	if err != nil {
		return err
	}
	fmt.Printf("# created %d Services and %d ready Pods in %s\n", *services, len(pods), time.Since(t0).Round(time.Second))

	startCM := func() (*exec.Cmd, error) {
		return start(filepath.Join(dir, "cm.log"), "controller-manager", "--kubeconfig", kc, "--identity", "bench",
			"--node-monitor-grace-period", "1h")
	}
	cm, err := startCM()
	if err != nil {
		return err
	}
	t0 = time.Now()
	if err := waitEndpoints(ctx, client, len(pods), func(n int) bool { return n == len(pods) }); err != nil {
		return err
	}
	fmt.Printf("RESULT initial-sync services=%d pods=%d took=%s\n", *services, len(pods), time.Since(t0).Round(time.Millisecond))

	lat, err := flipLatency(ctx, client, pods)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	fmt.Printf("RESULT pod-to-slice flips=%d p50=%s p99=%s max=%s\n", len(lat),
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	fmt.Printf("RESULT controller-manager rss_mib=%.1f services=%d pods=%d\n", host.MiB(cm.Process.Pid, "status")["VmRSS"], *services, len(pods))

	// Restart: changes made while it was down are written within ...
	before := writeCounts(ctx, client)
	cm.Process.Kill()
	cm.Wait()
	for _, p := range pods[:10] {
		if err := setReady(ctx, client, p, false); err != nil {
			return err
		}
	}
	if cm, err = startCM(); err != nil {
		return err
	}
	defer func() { cm.Process.Kill(); cm.Wait() }()
	t0 = time.Now()
	if err := waitEndpoints(ctx, client, len(pods), func(ready int) bool { return ready == len(pods)-10 }); err != nil {
		return err
	}
	fmt.Printf("RESULT resync-after-restart took=%s (process start to the 10 changes made while down being written)\n",
		time.Since(t0).Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	after := writeCounts(ctx, client)
	defer time.Sleep(*hold)
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			fmt.Printf("# writes after restart: %s %d\n", k, d)
		}
	}
	return nil
}

func waitReady(url string) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for range 900 {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready", url)
}

// populate creates the nodes, Services and Pods (with Ready status).
func populate(ctx context.Context, c kubernetes.Interface) ([]*corev1.Pod, error) {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for i := range 10 {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i),
			Labels: map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("z%d", i%3)}}}
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	out := make([]*corev1.Pod, *services**podsPer)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range *services {
		g.Go(func() error { return createOne(gctx, c, i, out) })
	}
	return out, g.Wait()
}

func createOne(ctx context.Context, c kubernetes.Interface, i int, out []*corev1.Pod) error {
	name := fmt.Sprintf("s%d", i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := c.CoreV1().Services("bench").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	for j := range *podsPer {
		n := i**podsPer + j
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, j), Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", n%10),
				Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"sleep"}}}}}
		p, err := c.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		ip := fmt.Sprintf("10.%d.%d.%d", 100+n/65536, n/256%256, n%256)
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if p, err = c.CoreV1().Pods("bench").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
		out[n] = p
	}
	return nil
}

// waitEndpoints polls the slices until done(number of ready endpoints).
func waitEndpoints(ctx context.Context, c kubernetes.Interface, total int, done func(ready int) bool) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.DiscoveryV1().EndpointSlices("bench").List(ctx, metav1.ListOptions{})
		if err == nil {
			ready := 0
			for _, s := range list.Items {
				for _, ep := range s.Endpoints {
					if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
						ready++
					}
				}
			}
			if done(ready) {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("endpoints never reached the expected state (%d pods)", total)
}

func setReady(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, ready bool) error {
	cur, err := c.CoreV1().Pods("bench").Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	_, err = c.CoreV1().Pods("bench").UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}

// flipLatency changes one pod's readiness at a time and measures until a
// slice event shows it.
func flipLatency(ctx context.Context, c kubernetes.Interface, pods []*corev1.Pod) ([]time.Duration, error) {
	w, err := c.DiscoveryV1().EndpointSlices("bench").Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	// Drain the initial state.
	for drained := false; !drained; {
		select {
		case <-w.ResultChan():
		case <-time.After(2 * time.Second):
			drained = true
		}
	}
	var lat []time.Duration
	for i := range *flips / 2 {
		p := pods[(i*7919)%len(pods)]
		// Out of rotation and back: two changes, both timed.
		for _, ready := range []bool{false, true} {
			t0 := time.Now()
			if err := setReady(ctx, c, p, ready); err != nil {
				return nil, err
			}
			if err := waitFor(w, p.Status.PodIP, ready); err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t0))
		}
	}
	return lat, nil
}

func waitFor(w watch.Interface, ip string, ready bool) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Addresses[0] == ip && ep.Conditions.Ready != nil && *ep.Conditions.Ready == ready {
					return nil
				}
			}
		case <-timeout:
			return fmt.Errorf("no slice showed %s ready=%v", ip, ready)
		}
	}
}

// writeCounts reads the API server's request counters for writes to
// endpoints and endpointslices, to see what a restart rewrites.
func writeCounts(ctx context.Context, c kubernetes.Interface) map[string]int {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	out := map[string]int{}
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		for _, res := range []string{"endpoints", "endpointslices"} {
			for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
				if strings.Contains(line, `resource="`+res+`"`) && strings.Contains(line, `verb="`+verb+`"`) {
					var n float64
					fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &n)
					out[res+" "+verb] += int(n)
				}
			}
		}
	}
	return out
}
