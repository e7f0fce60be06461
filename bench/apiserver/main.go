// Command apiserver benchmarks Portal's API write and read paths against
// their anchor, raw etcd puts to the same etcd, in the same run.
//
// It starts `portal apiserver` (embedded etcd) pinned to one core, drives it
// from this process (pinned to the other core by the caller, see run.sh),
// and prints RESULT lines:
//
//   - etcd puts of a stored Service's size, then Service creates through the
//     API, then etcd puts again (A/B/A), with 1, 8 and 32 parallel clients:
//     throughput, p50, p99, and the server's CPU time per operation;
//   - then, on a fresh server, the time to fill it with N Services;
//   - LIST of N Services (served from the watch cache) p50/p99;
//   - one update reaching 100 watchers: p50/p99 of delivery latency;
//   - RSS of the portal process holding N Services;
//   - Service creates by an ordinary user with --authorization-mode
//     AlwaysAllow, Node,RBAC, AlwaysAllow (A/B/A, fresh servers), and the
//     ratio of RBAC to AlwaysAllow.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

func main() {
	var (
		portal   = flag.String("portal", "bin/portal", "portal binary")
		core     = flag.String("server-core", "0", "CPU the server is pinned to (empty: no pinning)")
		duration = flag.Duration("duration", 10*time.Second, "length of each throughput run")
		services = flag.Int("services", 10000, "services to hold for the LIST, watch and RSS runs")
		watchers = flag.Int("watchers", 100, "watchers for the watch latency run")
		clients  = flag.String("clients", "1,8,32", "parallel clients of the throughput runs")
		profile  = flag.String("cpuprofile", "", "write the server's CPU profile of the creates at the most clients to this file")
		authzC   = flag.Int("authz-clients", 8, "parallel clients of the authorization run; 0 skips it")
		only     = flag.Bool("authz-only", false, "run only the authorization comparison")
	)
	flag.Parse()
	var cs []int
	for _, f := range strings.Split(*clients, ",") {
		var c int
		if _, err := fmt.Sscan(f, &c); err != nil || c < 1 {
			fmt.Fprintln(os.Stderr, "bench: bad -clients", *clients)
			os.Exit(2)
		}
		cs = append(cs, c)
	}
	if !*only {
		if err := run(*portal, *core, *duration, *services, *watchers, cs, *profile); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if *authzC > 0 {
		if err := authorization(context.Background(), *portal, *core, *duration, *authzC); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

func run(portal, core string, d time.Duration, nServices, nWatchers int, clients []int, profile string) error {
	ctx := context.Background()
	if err := throughput(ctx, portal, core, d, clients, profile); err != nil {
		return err
	}
	if nServices == 0 {
		return nil
	}
	// The throughput runs leave tens of thousands of Services behind: the
	// fill, LIST, watch and RSS figures start from a fresh server.
	dir, srv, client, err := start(portal, core)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer srv.stop()
	if err := fill(ctx, client, nServices); err != nil {
		return err
	}
	listLatency(ctx, client)
	watchLatency(ctx, client, nWatchers)
	fmt.Printf("RESULT rss services=%d rss_mib=%.1f (portal apiserver process, embedded etcd included)\n",
		nServices, host.MiB(srv.cmd.Process.Pid, "status")["VmRSS"])
	return nil
}

// start runs portal apiserver in a new data directory and returns a
// client of it.
func start(portal, core string, args ...string) (string, *server, kubernetes.Interface, error) {
	dir, err := os.MkdirTemp("", "portal-bench-")
	if err != nil {
		return "", nil, nil, err
	}
	srv, err := startPortal(portal, core, dir, args...)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		srv.stop()
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	// As controllers do: protobuf on the wire.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return dir, srv, kubernetes.NewForConfigOrDie(cfg), nil
}

// throughput runs puts, creates, puts at each client count.
func throughput(ctx context.Context, portal, core string, d time.Duration, clients []int, profile string) error {
	dir, srv, client, err := start(portal, core)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer srv.stop()
	etcd, err := etcdClient(dir)
	if err != nil {
		return err
	}
	defer etcd.Close()

	value := storedServiceSize(ctx, client, etcd)
	fmt.Printf("# stored Service size %d bytes\n", value)
	// measure runs one throughput run and adds the server's CPU time per
	// operation: unlike the rates, it hardly depends on what else the
	// machine is doing.
	measure := func(d time.Duration, c int, op func(worker, i int) error) result {
		cpu0 := host.CPU(srv.cmd.Process.Pid)
		r := measure(d, c, op)
		if r.n > 0 {
			r.cpuPerOp = (host.CPU(srv.cmd.Process.Pid) - cpu0) / time.Duration(r.n)
		}
		return r
	}
	for i, c := range clients {
		a1 := measure(d, c, etcdPut(etcd, value))
		var prof chan error
		if profile != "" && i == len(clients)-1 {
			prof = make(chan error, 1)
			go func() { prof <- cpuProfile(ctx, client, d, profile) }()
		}
		b := measure(d, c, serviceCreate(client, fmt.Sprintf("c%d", c)))
		if prof != nil {
			if err := <-prof; err != nil {
				fmt.Println("# cpuprofile:", err)
			}
		}
		a2 := measure(d, c, etcdPut(etcd, value))
		anchor := (a1.rate + a2.rate) / 2
		a1.print("etcd-put", c)
		b.print("service-create", c)
		a2.print("etcd-put", c)
		fmt.Printf("RESULT ratio service-create/etcd-put c=%d %.2f server_cpu_per_op %.2f\n", c, b.rate/anchor,
			2*b.cpuPerOp.Seconds()/(a1.cpuPerOp+a2.cpuPerOp).Seconds())
	}
	return nil
}

type server struct {
	cmd *exec.Cmd
}

func startPortal(binary, core, dir string, extra ...string) (*server, error) {
	args := append([]string{"apiserver", "--data-dir", dir, "--secure-port", "16999"}, extra...)
	cmd := exec.Command(binary, args...)
	if core != "" {
		cmd = exec.Command("taskset", append([]string{"-c", core, binary}, args...)...)
	}
	log, err := os.Create(filepath.Join(dir, "portal.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for range 600 {
		resp, err := hc.Get("https://127.0.0.1:16999/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("portal not ready; see %s", log.Name())
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
}

func etcdClient(dir string) (*clientv3.Client, error) {
	ports, err := os.ReadFile(filepath.Join(dir, "etcd-ports"))
	if err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(dir, "pki", "etcd")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, "apiserver-client.crt"), filepath.Join(pkiDir, "apiserver-client.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://127.0.0.1:" + strings.Fields(string(ports))[0]},
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool},
		DialTimeout: 5 * time.Second,
	})
}

func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// storedServiceSize creates one Service and reads back how many bytes the
// API server stored for it, so etcd puts carry the same size.
func storedServiceSize(ctx context.Context, client kubernetes.Interface, etcd *clientv3.Client) int {
	if _, err := client.CoreV1().Services("default").Create(ctx, service("size-probe"), metav1.CreateOptions{}); err != nil {
		return 400
	}
	resp, err := etcd.Get(ctx, "/registry/services/default/size-probe")
	if err != nil || len(resp.Kvs) == 0 {
		return 400
	}
	return len(resp.Kvs[0].Value)
}

type result struct {
	n        int
	rate     float64
	p50, p99 time.Duration
	errors   int64
	cpuPerOp time.Duration // server (API server and etcd) CPU time per operation
}

func (r result) print(what string, c int) {
	fmt.Printf("RESULT %s c=%d ops=%d ops_per_s=%.0f p50=%s p99=%s errors=%d server_cpu_per_op=%s\n",
		what, c, r.n, r.rate, r.p50, r.p99, r.errors, r.cpuPerOp.Round(time.Microsecond))
}

// measure runs op from c goroutines for d and returns throughput and
// latency percentiles.
func measure(d time.Duration, c int, op func(worker, i int) error) result {
	var errs atomic.Int64
	lat := make([][]time.Duration, c)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := op(w, i); err != nil {
					errs.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := result{n: len(all), rate: float64(len(all)) / elapsed.Seconds(), errors: errs.Load()}
	if len(all) > 0 {
		r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	return r
}

func etcdPut(etcd *clientv3.Client, size int) func(w, i int) error {
	value := strings.Repeat("x", size)
	var round atomic.Int64
	prefix := fmt.Sprintf("/bench/%d/", round.Add(1))
	return func(w, i int) error {
		_, err := etcd.Put(context.Background(), fmt.Sprintf("%s%d/%d", prefix, w, i), value)
		return err
	}
}

func serviceCreate(client kubernetes.Interface, tag string) func(w, i int) error {
	return func(w, i int) error {
		_, err := client.CoreV1().Services("default").Create(context.Background(),
			service(fmt.Sprintf("%s-%d-%d", tag, w, i)), metav1.CreateOptions{})
		return err
	}
}

// fill creates Services in namespace "fill" until it holds n.
func fill(ctx context.Context, client kubernetes.Interface, n int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fill"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	var next, done atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	// marks[i] is when the (i*1000)th create finished: the allocation cost
	// of the last thousand against the first shows whether it stays O(1).
	marks := make([]atomic.Int64, n/1000+1)
	start := time.Now()
	marks[0].Store(start.UnixNano())
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := client.CoreV1().Services("fill").Create(ctx, service(fmt.Sprintf("s%d", i)), metav1.CreateOptions{}); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
				if d := done.Add(1); d%1000 == 0 {
					marks[d/1000].Store(time.Now().UnixNano())
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	if k := n / 1000; k >= 2 {
		first := time.Duration(marks[1].Load() - marks[0].Load())
		last := time.Duration(marks[k].Load() - marks[k-1].Load())
		fmt.Printf("RESULT fill services=%d total=%s first1000=%s last1000=%s ratio=%.2f (32 clients)\n",
			n, time.Since(start).Round(time.Millisecond), first.Round(time.Millisecond), last.Round(time.Millisecond),
			last.Seconds()/first.Seconds())
	}
	return nil
}

func listLatency(ctx context.Context, client kubernetes.Interface) {
	var lat []time.Duration
	count := 0
	for range 20 {
		t0 := time.Now()
		list, err := client.CoreV1().Services("fill").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			fmt.Println("# list:", err)
			return
		}
		lat = append(lat, time.Since(t0))
		count = len(list.Items)
	}
	slices.Sort(lat)
	fmt.Printf("RESULT list services=%d p50=%s p99=%s (resourceVersion=0: watch cache; protobuf)\n",
		count, lat[len(lat)/2], lat[len(lat)-1])
}

// watchLatency opens nWatchers watches on one namespace, then updates a
// Service 20 times and measures, for every watcher, the time from the
// update's response to the event's arrival.
func watchLatency(ctx context.Context, client kubernetes.Interface, nWatchers int) {
	svcs := client.CoreV1().Services("default")
	if _, err := svcs.Create(ctx, service("watched"), metav1.CreateOptions{}); err != nil {
		fmt.Println("# watch:", err)
		return
	}
	type arrival struct {
		rv string
		at time.Time
	}
	arrivals := make(chan arrival, nWatchers*64)
	var ws []watch.Interface
	for range nWatchers {
		w, err := svcs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=watched"})
		if err != nil {
			fmt.Println("# watch:", err)
			return
		}
		ws = append(ws, w)
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Modified {
					arrivals <- arrival{rv: rvOf(ev.Object), at: time.Now()}
				}
			}
		}()
	}
	defer func() {
		for _, w := range ws {
			w.Stop()
		}
	}()
	time.Sleep(time.Second)
	sent := map[string]time.Time{}
	var lat []time.Duration
	for i := range 20 {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{"round":"r%d"}}}`, i)
		t0 := time.Now()
		svc, err := svcs.Patch(ctx, "watched", "application/merge-patch+json", patch, metav1.PatchOptions{})
		if err != nil {
			fmt.Println("# watch patch:", err)
			return
		}
		sent[svc.ResourceVersion] = t0
		for range nWatchers {
			select {
			case a := <-arrivals:
				if s, ok := sent[a.rv]; ok {
					lat = append(lat, a.at.Sub(s))
				}
			case <-time.After(5 * time.Second):
				fmt.Println("# watch: event missing")
			}
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	fmt.Printf("RESULT watch watchers=%d events=%d p50=%s p99=%s (from the update request's start)\n",
		nWatchers, len(lat), lat[len(lat)/2], lat[len(lat)*99/100])
}

func rvOf(obj runtime.Object) string {
	if svc, ok := obj.(*corev1.Service); ok {
		return svc.ResourceVersion
	}
	return ""
}

// cpuProfile fetches the server's CPU profile over d (the generic API
// server serves /debug/pprof to the admin) into file.
func cpuProfile(ctx context.Context, client kubernetes.Interface, d time.Duration, file string) error {
	secs := int(d.Seconds()) - 1
	if secs < 1 {
		secs = 1
	}
	data, err := client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", fmt.Sprint(secs)).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}
