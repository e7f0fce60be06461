// Command proxy benchmarks `portal proxy` in a kernel mode: the time of a
// full sync with N Services, of a partial sync of one changed Service among
// them, the network programming latency, the proxy's RSS, and throughput
// through a ClusterIP against a bare nftables DNAT rule to the same backend
// in the same run (anchor, Portal, anchor), with few and with N Services.
//
// run.sh starts it inside a fresh network namespace, so everything it
// starts (API server, proxy, nginx) and every rule lives and dies there.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"portal.dev/portal/bench/internal/host"
	"portal.dev/portal/bench/internal/node"
)

var (
	portal     = flag.String("portal", "bin/portal", "portal binary")
	mode       = flag.String("mode", "nftables", "proxy mode")
	proxyCore  = flag.String("proxy-core", "0", "CPU for the proxy")
	otherCore  = flag.String("other-core", "1", "CPU for the API server, nginx and the load")
	services   = flag.Int("services", 10000, "Services at scale")
	endpoints  = flag.Int("endpoints", 10, "endpoints per Service at scale")
	changes    = flag.Int("changes", 40, "single-Service changes to time at scale")
	wrkDur     = flag.Duration("wrk-duration", 10*time.Second, "duration of each wrk run")
	throughput = flag.Bool("throughput", true, "run the wrk/curl throughput comparison")
	last       = flag.Bool("last", false, "name the throughput Service so it sorts after the others (iptables mode matches Services in name order: the worst case)")
	rounds     = flag.Int("rounds", 1, "throughput: Portal runs, each between two anchor runs; past 1, medians are printed too")
	keep       = flag.Bool("keep", false, "keep the data directory and logs")
)

const (
	backendIP = "10.244.0.10" // nginx, on an otherwise empty bridge
	anchorVIP = "10.97.0.1"   // the bare DNAT rule's address (outside the service range)
	apiPort   = "16443"
	metrics   = "127.0.0.1:10249"
)

func main() {
	flag.Parse()
	if os.Getenv("PORTAL_BENCH_NETNS") == "" {
		fmt.Fprintln(os.Stderr, "bench: run me through bench/proxy/run.sh (it makes the network namespace)")
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	dir    string
	client kubernetes.Interface
	procs  node.Procs
}

// run sets the namespace and the API server up, compares throughput
// through a Service with the anchor, and reports the first full sync,
// the partial syncs under churn and the proxy's memory.
func run() error {
	dir, err := os.MkdirTemp("", "portal-bench-proxy-")
	if err != nil {
		return err
	}
	os.Chmod(dir, 0o755) // nginx workers read the pages as nobody
	b := &bench{dir: dir, procs: node.Procs{Dir: dir}}
	defer b.procs.Stop()
	if *keep {
		fmt.Println("# data and logs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := setupNetwork(); err != nil {
		return err
	}
	if err := b.startAPIServer(); err != nil {
		return err
	}
	ctx := context.Background()

	// web-0 is the Service the throughput runs go through.
	if err := b.fill(ctx, 0, 10, 1); err != nil {
		return err
	}
	web, err := b.client.CoreV1().Services("default").Get(ctx, serviceName(0), metav1.GetOptions{})
	if err != nil {
		return err
	}
	vip := web.Spec.ClusterIP
	if *throughput {
		if err := b.startNginx(); err != nil {
			return err
		}
	}
	proxy, err := b.startProxy()
	if err != nil {
		return err
	}
	if err := host.WaitHTTP("http://"+vip+"/1k.bin", 30*time.Second); *throughput && err != nil {
		return fmt.Errorf("ClusterIP %s: %w", vip, err)
	}
	if *throughput {
		if err := b.compare(vip, 10); err != nil {
			return err
		}
	}
	node.Stop(proxy)
	if proxy, err = b.firstFullSync(ctx); err != nil {
		return err
	}
	if err := b.partialSyncs(ctx, proxy); err != nil {
		return err
	}
	if *throughput {
		if err := b.compare(vip, *services); err != nil {
			return err
		}
	}
	return nil
}

// setupNetwork brings up the namespace's loopback and the bridge the
// backend listens on, and tunes the kernel for many short connections.
func setupNetwork() error {
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", "bk0", "type", "bridge"}, // this kernel has no dummy links
		{"ip", "addr", "add", backendIP + "/16", "dev", "bk0"},
		{"ip", "link", "set", "bk0", "up"},
		{"ip", "route", "add", "default", "dev", "bk0"},
		{"sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000", "net.ipv4.tcp_tw_reuse=1"},
		// Connection-per-request runs leave many conntrack entries in
		// TIME_WAIT; their clashes with reused client ports would make
		// every later run slower than the one before, whatever the target.
		{"sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_timeout_time_wait=1", "net.ipv4.tcp_max_tw_buckets=1024"},
	} {
		if err := sh(args...); err != nil {
			return err
		}
	}
	return nil
}

// startAPIServer starts the API server and makes b's client for it.
func (b *bench) startAPIServer() error {
	if _, err := b.start("apiserver", *otherCore, *portal, "apiserver", "--data-dir", b.dir, "--secure-port", apiPort); err != nil {
		return err
	}
	if err := host.WaitHTTP("https://127.0.0.1:"+apiPort+"/readyz", 90*time.Second); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(b.dir, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = runtime.ContentTypeProtobuf
	b.client = kubernetes.NewForConfigOrDie(cfg)
	return nil
}

// firstFullSync fills the API with the proxy stopped, then starts it and
// reports the time of its first full sync and its memory after it.
func (b *bench) firstFullSync(ctx context.Context) (*exec.Cmd, error) {
	t0 := time.Now()
	if err := b.fill(ctx, 10, *services, *endpoints); err != nil {
		return nil, err
	}
	fmt.Printf("# created %d Services with %d endpoints each in %s\n", *services, *endpoints, time.Since(t0).Round(time.Second))
	t0 = time.Now()
	proxy, err := b.startProxy()
	if err != nil {
		return nil, err
	}
	// /healthz answers before the first sync; wait for the sync itself.
	var full hist
	for {
		m, err := scrape()
		if err != nil {
			return nil, err
		}
		if full = m.histogram("kubeproxy_sync_full_proxy_rules_duration_seconds"); full.count > 0 {
			break
		}
		// iptables mode takes far longer than nftables with many
		// Services, and the cores are shared.
		if time.Since(t0) > 10*time.Minute {
			return nil, fmt.Errorf("no full sync within 10m of the proxy's start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ready := time.Since(t0)
	// One observation, so the histogram's sum is its exact duration.
	fmt.Printf("RESULT %s full-sync services=%d endpoints=%d first_full_sync=%s synced_after_start=%s\n",
		*mode, *services, *services**endpoints, secs(full.mean()), ready.Round(time.Millisecond))
	fmt.Printf("RESULT %s rss services=%d endpoints=%d rss_mib=%.1f %s\n", *mode, *services, *services**endpoints, host.MiB(proxy.Process.Pid, "status")["VmRSS"], memDetail(proxy.Process.Pid))
	return proxy, nil
}

// partialSyncs churns endpoints and reports the partial syncs, the
// network programming latency and the proxy's memory after.
func (b *bench) partialSyncs(ctx context.Context, proxy *exec.Cmd) error {
	before, _ := scrape()
	each, err := b.churn(ctx)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	after, err := scrape()
	if err != nil {
		return err
	}
	part := after.histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds").minus(before.histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds"))
	prog := after.histogram("kubeproxy_network_programming_duration_seconds").minus(before.histogram("kubeproxy_network_programming_duration_seconds"))
	fmt.Printf("RESULT %s partial-sync services=%d changes=%d syncs=%.0f mean=%s p50<=%s p99<=%s\n", *mode, *services, *changes,
		part.count, secs(part.mean()), secs(part.quantile(0.5)), secs(part.quantile(0.99)))
	if len(each) > 0 {
		sort.Float64s(each)
		rank := func(q float64) float64 { return each[int(math.Ceil(q*float64(len(each))))-1] }
		fmt.Printf("RESULT %s partial-sync-measured services=%d syncs=%d p50=%s p99=%s max=%s\n", *mode, *services,
			len(each), secs(rank(0.5)), secs(rank(0.99)), secs(each[len(each)-1]))
	}
	fmt.Printf("RESULT %s programming-latency services=%d n=%.0f p50<=%s p99<=%s\n", *mode, *services,
		prog.count, secs(prog.quantile(0.5)), secs(prog.quantile(0.99)))
	fmt.Printf("RESULT %s rss-after-churn rss_mib=%.1f %s\n", *mode, host.MiB(proxy.Process.Pid, "status")["VmRSS"], memDetail(proxy.Process.Pid))
	// The Go runtime hands freed pages back to the OS over a minute or so.
	time.Sleep(30 * time.Second)
	fmt.Printf("RESULT %s rss-settled rss_mib=%.1f %s\n", *mode, host.MiB(proxy.Process.Pid, "status")["VmRSS"], memDetail(proxy.Process.Pid))
	return nil
}

// fill creates Services web-from..web-(to-1), selector-less, each with one
// EndpointSlice of n endpoints; web-0's first endpoint is the nginx.
func (b *bench) fill(ctx context.Context, from, to, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := from; i < to; i++ {
		g.Go(func() error { return b.createService(ctx, i, n) })
	}
	return g.Wait()
}

func (b *bench) createService(ctx context.Context, i, n int) error {
	name := serviceName(i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP,
			Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := b.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := b.client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice(name, i, n, 0), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create slice of %s: %w", name, err)
	}
	return nil
}

// serviceName is Service i's name: web-i, but with -last the throughput
// Service web-0 is zz-web-0, after every web-i.
func serviceName(i int) string {
	if i == 0 && *last {
		return "zz-web-0"
	}
	return fmt.Sprintf("web-%d", i)
}

// slice is Service i's EndpointSlice at generation gen: n endpoints in
// 10.128.0.0/9, shifted by gen so a change replaces one address.
func slice(name string, i, n, gen int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name},
			Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": time.Now().UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for j := range n {
		k := i*64 + j + gen
		addr := fmt.Sprintf("10.%d.%d.%d", 128+k>>16&127, k>>8&255, k&255)
		if i == 0 && j == 0 {
			addr = backendIP
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// churn changes one endpoint of one Service at a time, spaced so that each
// change gets a sync of its own (the proxy syncs at most once per
// --min-sync-period).
// churn changes one Service's endpoints every 1.2 s, *changes times,
// and returns the durations of the partial syncs it saw one at a time:
// the partial sync histogram scraped between two changes grew by one
// observation, whose exact duration is what its sum grew by.
func (b *bench) churn(ctx context.Context) ([]float64, error) {
	var each []float64
	const metric = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
	prev, err := scrape()
	if err != nil {
		return nil, err
	}
	for c := range *changes {
		i := 10 + (c*7919)%(*services-10)
		name := fmt.Sprintf("web-%d", i)
		cur, err := b.client.DiscoveryV1().EndpointSlices("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		next := slice(name, i, *endpoints, c+1)
		next.ResourceVersion = cur.ResourceVersion
		if _, err := b.client.DiscoveryV1().EndpointSlices("default").Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		time.Sleep(1200 * time.Millisecond)
		m, err := scrape()
		if err != nil {
			return nil, err
		}
		if d := m.histogram(metric).minus(prev.histogram(metric)); d.count == 1 {
			each = append(each, d.sum)
		}
		prev = m
	}
	return each, nil
}

func (b *bench) startProxy() (*exec.Cmd, error) {
	kc := filepath.Join(b.dir, "admin.kubeconfig")
	p, err := b.start("proxy", *proxyCore, *portal, "proxy", "--kubeconfig", kc, "--proxy-mode", *mode,
		"--hostname-override", "bench", "--metrics-bind-address", metrics, "--healthz-bind-address", "127.0.0.1:10256")
	if err != nil {
		return nil, err
	}
	return p, host.WaitHTTP("http://127.0.0.1:10256/healthz", 120*time.Second)
}

func (b *bench) startNginx() error {
	www := filepath.Join(b.dir, "www")
	os.MkdirAll(filepath.Join(b.dir, "nginx"), 0o755)
	os.MkdirAll(www, 0o755)
	if err := os.WriteFile(filepath.Join(www, "1k.bin"), bytes.Repeat([]byte("a"), 1024), 0o644); err != nil {
		return err
	}
	big, err := os.Create(filepath.Join(www, "big.bin"))
	if err != nil {
		return err
	}
	io.CopyN(big, zeros{}, 100<<20)
	big.Close()
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx/nginx.pid;
error_log %[1]s/nginx/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  sendfile on; tcp_nopush on;
  keepalive_requests 100000000; keepalive_timeout 65;
  client_body_temp_path %[1]s/nginx; proxy_temp_path %[1]s/nginx;
  fastcgi_temp_path %[1]s/nginx; uwsgi_temp_path %[1]s/nginx; scgi_temp_path %[1]s/nginx;
  default_type application/octet-stream;
  server { listen %[2]s:8080 backlog=4096; root %[3]s; }
}
`, b.dir, backendIP, www)
	cf := filepath.Join(b.dir, "nginx", "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return err
	}
	if _, err := b.start("nginx", *otherCore, "nginx", "-p", filepath.Join(b.dir, "nginx"), "-c", cf); err != nil {
		return err
	}
	return host.WaitHTTP("http://"+backendIP+":8080/1k.bin", 10*time.Second)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// compare runs the same load through the bare DNAT anchor and Portal's
// ClusterIP in turn, anchor first and last (anchor, Portal, anchor, ...),
// and with -rounds > 1 prints the medians of each and their ratio: on
// shared cores single runs swing by 2x.
func (b *bench) compare(vip string, n int) error {
	anchor := fmt.Sprintf("table ip portal-bench-anchor {\n chain out {\n  type nat hook output priority -100;\n  ip daddr %s tcp dport 80 dnat to %s:8080\n }\n}\n", anchorVIP, backendIP)
	if err := shIn(anchor, "nft", "-f", "-"); err != nil {
		return err
	}
	defer sh("nft", "delete", "table", "ip", "portal-bench-anchor")
	type target struct{ name, addr string }
	order := []target{{"bare-dnat", anchorVIP}}
	for range max(*rounds, 1) {
		order = append(order, target{"portal-" + *mode, vip}, target{"bare-dnat", anchorVIP})
	}
	got := map[string][]float64{} // "target load" -> results
	for _, target := range order {
		for _, load := range []struct {
			label string
			args  []string
		}{{"keepalive", nil}, {"close", []string{"-H", "Connection: close"}}} {
			rps, p50, p99, err := wrk(target.addr, load.args)
			if err != nil {
				return err
			}
			fmt.Printf("RESULT l4 %s services=%d %s rps=%.0f p50=%s p99=%s\n", target.name, n, load.label, rps, p50, p99)
			got[target.name+" "+load.label] = append(got[target.name+" "+load.label], rps)
		}
		mbps, err := bulk(target.addr)
		if err != nil {
			return err
		}
		fmt.Printf("RESULT l4 %s services=%d bulk100MiB MBps_mean=%.0f\n", target.name, n, mbps)
		got[target.name+" bulk100MiB"] = append(got[target.name+" bulk100MiB"], mbps)
	}
	if *rounds > 1 {
		for _, load := range []string{"keepalive", "close", "bulk100MiB"} {
			p, a := median(got["portal-"+*mode+" "+load]), median(got["bare-dnat "+load])
			fmt.Printf("RESULT l4-median portal-%s services=%d %s portal=%.0f bare-dnat=%.0f ratio=%.2f (runs: %d and %d)\n",
				*mode, n, load, p, a, p/a, len(got["portal-"+*mode+" "+load]), len(got["bare-dnat "+load]))
		}
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

var (
	rpsRe = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	errRe = regexp.MustCompile(`Socket errors: (.*)`)
	p50Re = regexp.MustCompile(`\s50%\s+(\S+)`)
	p99Re = regexp.MustCompile(`\s99%\s+(\S+)`)
)

func wrk(addr string, extra []string) (float64, string, string, error) {
	args := append([]string{"-c", *otherCore, "wrk", "-t1", "-c64", "-d" + wrkDur.String(), "--latency"}, extra...)
	out, err := exec.Command("taskset", append(args, "http://"+addr+"/1k.bin")...).CombinedOutput()
	if err != nil {
		return 0, "", "", fmt.Errorf("wrk: %v: %s", err, out)
	}
	m := rpsRe.FindSubmatch(out)
	if m == nil {
		return 0, "", "", fmt.Errorf("wrk output: %s", out)
	}
	rps, _ := strconv.ParseFloat(string(m[1]), 64)
	p50, p99 := "?", "?"
	if m := p50Re.FindSubmatch(out); m != nil {
		p50 = string(m[1])
	}
	if m := p99Re.FindSubmatch(out); m != nil {
		p99 = string(m[1])
	}
	if m := errRe.FindSubmatch(out); m != nil {
		p99 += " errors=[" + string(m[1]) + "]"
	}
	return rps, p50, p99, nil
}

func bulk(addr string) (float64, error) {
	var sum float64
	for range 5 {
		out, err := exec.Command("taskset", "-c", *otherCore, "curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}",
			"http://"+addr+"/big.bin").Output()
		if err != nil {
			return 0, fmt.Errorf("curl: %v", err)
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		sum += v / 1e6
	}
	return sum / 5, nil
}

// start runs args pinned to core, with its output in NAME.log.
func (b *bench) start(name, core string, args ...string) (*exec.Cmd, error) {
	return b.procs.Start(name, "", append([]string{"taskset", "-c", core}, args...)...)
}

func sh(args ...string) error { return shIn("", args...) }

func shIn(stdin string, args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// memDetail splits the RSS into anonymous memory and pages of files
// (the binary), and adds the Go heap in use from the proxy's metrics.
func memDetail(pid int) string {
	st := host.MiB(pid, "status")
	heap := math.NaN()
	if m, err := scrape(); err == nil {
		if mf := m["go_memstats_heap_inuse_bytes"]; mf != nil && len(mf.Metric) > 0 {
			heap = mf.Metric[0].GetGauge().GetValue() / (1 << 20)
		}
	}
	return fmt.Sprintf("anon_mib=%.1f file_mib=%.1f heap_inuse_mib=%.1f", st["RssAnon"], st["RssFile"], heap)
}

func secs(s float64) string {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return "?"
	}
	return time.Duration(s * float64(time.Second)).Round(100 * time.Microsecond).String()
}

// metricSet is one scrape of the proxy's /metrics.
type metricSet map[string]*dto.MetricFamily

func scrape() (metricSet, error) {
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	return metricSet(fams), err
}

// hist is a cumulative histogram: upper bounds and counts.
type hist struct {
	bounds []float64
	counts []float64
	count  float64
	sum    float64
}

func (m metricSet) histogram(name string) hist {
	var h hist
	f, ok := m[name]
	if !ok || len(f.Metric) == 0 || f.Metric[0].Histogram == nil {
		return h
	}
	mh := f.Metric[0].Histogram
	for _, b := range mh.Bucket {
		h.bounds = append(h.bounds, b.GetUpperBound())
		h.counts = append(h.counts, float64(b.GetCumulativeCount()))
	}
	h.count, h.sum = float64(mh.GetSampleCount()), mh.GetSampleSum()
	return h
}

func (h hist) minus(o hist) hist {
	out := hist{bounds: h.bounds, count: h.count - o.count, sum: h.sum - o.sum}
	for i := range h.counts {
		c := h.counts[i]
		if i < len(o.counts) {
			c -= o.counts[i]
		}
		out.counts = append(out.counts, c)
	}
	return out
}

func (h hist) mean() float64 { return h.sum / h.count }

// quantile is the upper bound of the bucket holding quantile q.
func (h hist) quantile(q float64) float64 {
	want := q * h.count
	i := sort.Search(len(h.counts), func(i int) bool { return h.counts[i] >= want })
	if i == len(h.bounds) || h.count == 0 {
		return math.Inf(1)
	}
	return h.bounds[i]
}
