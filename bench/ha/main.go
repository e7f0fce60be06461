// Command ha benchmarks the embedded etcd cluster of `portal server
// --cluster-init` and `--join`: how long Service creates are unavailable
// after kill -9 of the etcd leader's server (p50 and max over -runs), and
// the Service create throughput of a three-member cluster against a
// single member (the anchor: etcd's replication cost), in the same run.
//
// Each server runs in a network namespace of its own on one LAN (a bridge
// in a namespace of its own); the driver reaches each through a socket it
// opens inside that namespace. Nothing is added to the host's namespace.
// It needs root and `ip`.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	portal   = flag.String("portal", "bin/portal", "portal binary")
	runs     = flag.Int("runs", 10, "leader kills to time")
	nWriters = flag.Int("writers", 6, "parallel writers during the kills")
	creates  = flag.Int("creates", 2000, "Services created per throughput run")
	clients  = flag.Int("clients", 8, "parallel clients of the throughput runs")
	keep     = flag.Bool("keep", false, "keep the data directories and logs")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "bench-ha-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	fmt.Printf("# bench/ha: %d leader kills under %d writers; throughput %d creates, %d clients; logs in %s\n", *runs, *nWriters, *creates, *clients, dir)
	l := &lan{prefix: fmt.Sprintf("hab%d", os.Getpid()%100000), dir: dir}
	defer l.teardown()
	if err := l.setup(4); err != nil {
		return err
	}
	// Throughput: one member (the anchor), three members, one member.
	var one, three []float64
	for i, size := range []int{1, 3, 1} {
		rate, err := l.throughput(fmt.Sprintf("tp%d", i), size)
		if err != nil {
			return err
		}
		fmt.Printf("throughput members=%d: %.0f creates/s\n", size, rate)
		if size == 1 {
			one = append(one, rate)
		} else {
			three = append(three, rate)
		}
	}
	anchor := (one[0] + one[1]) / 2
	fmt.Printf("service_create_throughput three_members=%.0f/s one_member=%.0f/s ratio=%.2f\n", three[0], anchor, three[0]/anchor)
	gaps, err := l.failovers(*runs)
	if err != nil {
		return err
	}
	slices.Sort(gaps)
	fmt.Printf("etcd_leader_failover writes_unavailable p50=%v max=%v runs=%d\n",
		gaps[len(gaps)/2].Round(10*time.Millisecond), gaps[len(gaps)-1].Round(10*time.Millisecond), len(gaps))
	return nil
}

// lan is the bench's network: node namespaces on one bridge.
type lan struct {
	prefix, dir string
	nodes       []*node
}

// node is one server node.
type node struct {
	name, ns, ip string
	fd           int
	cmd          *exec.Cmd
	dataDir      string
	// args are the node's own flags of its last start.
	args []string
}

func sh(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (l *lan) setup(n int) error {
	sw := l.prefix + "-lan"
	cmds := [][]string{{"ip", "netns", "add", sw}, {"ip", "-n", sw, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", sw, "link", "set", "br0", "up"}}
	for i := 1; i <= n; i++ {
		nd := &node{name: fmt.Sprintf("s%d", i), ns: fmt.Sprintf("%s-s%d", l.prefix, i), ip: fmt.Sprintf("10.98.0.%d", i)}
		l.nodes = append(l.nodes, nd)
		cmds = append(cmds, []string{"ip", "netns", "add", nd.ns},
			[]string{"ip", "-n", nd.ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", sw, "link", "add", "v" + nd.name, "type", "veth", "peer", "name", "eth0", "netns", nd.ns},
			[]string{"ip", "-n", sw, "link", "set", "v" + nd.name, "master", "br0"},
			[]string{"ip", "-n", sw, "link", "set", "v" + nd.name, "up"},
			[]string{"ip", "-n", nd.ns, "addr", "add", nd.ip + "/24", "dev", "eth0"},
			[]string{"ip", "-n", nd.ns, "link", "set", "eth0", "up"})
	}
	for _, c := range cmds {
		if err := sh(c...); err != nil {
			return err
		}
	}
	for _, nd := range l.nodes {
		fd, err := unix.Open("/run/netns/"+nd.ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		nd.fd = fd
	}
	return nil
}

func (l *lan) teardown() {
	for _, nd := range l.nodes {
		nd.kill()
		exec.Command("ip", "netns", "del", nd.ns).Run()
	}
	exec.Command("ip", "netns", "del", l.prefix+"-lan").Run()
}

// dial connects from inside the node's namespace.
func (nd *node) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(nd.fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // else the thread dies with the goroutine
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// start runs `portal server` on the node with args; fresh starts a new
// data directory under tag.
func (l *lan) start(nd *node, tag string, fresh bool, args ...string) error {
	if fresh || nd.dataDir == "" {
		nd.dataDir = filepath.Join(l.dir, tag, nd.name)
		if err := os.MkdirAll(nd.dataDir, 0o700); err != nil {
			return err
		}
	}
	log, err := os.OpenFile(filepath.Join(nd.dataDir, "portal.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	nd.args = args
	argv := append([]string{"netns", "exec", nd.ns, *portal, "server", "--data-dir", nd.dataDir, "--bind-address", "0.0.0.0",
		"--advertise-address", nd.ip, "--hostname-override", nd.name, "--disable", "dns,proxy,agent,ingress"}, args...)
	nd.cmd = exec.Command("ip", argv...)
	nd.cmd.Stdout, nd.cmd.Stderr = log, log
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := nd.cmd.Start(); err != nil {
		return err
	}
	return nd.waitReady()
}

func (nd *node) waitReady() error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if c, err := nd.client(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			cancel()
			if err == nil && string(body) == "ok" {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready in 2m; see %s/portal.log", nd.name, nd.dataDir)
}

func (nd *node) client() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(nd.dataDir, "admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Dial, cfg.QPS, cfg.Burst, cfg.Timeout = "https://127.0.0.1:6443", nd.dial, 5000, 5000, 20*time.Second
	return kubernetes.NewForConfig(cfg)
}

func (nd *node) kill() {
	if nd.cmd != nil && nd.cmd.ProcessState == nil {
		nd.cmd.Process.Kill()
		nd.cmd.Wait()
	}
}

// cluster starts a fresh cluster of size members on the first nodes.
func (l *lan) cluster(tag string, size int) error {
	for _, nd := range l.nodes {
		nd.kill()
	}
	first := l.nodes[0]
	if err := l.start(first, tag, true, "--cluster-init"); err != nil {
		return err
	}
	token, err := os.ReadFile(filepath.Join(first.dataDir, "token"))
	if err != nil {
		return err
	}
	for _, nd := range l.nodes[1:size] {
		if err := l.start(nd, tag, true, "--join", "https://"+first.ip+":6443", "--token", strings.TrimSpace(string(token))); err != nil {
			return err
		}
	}
	return nil
}

// throughput creates -creates Services through the first server of a
// fresh cluster of size members and returns creates per second.
func (l *lan) throughput(tag string, size int) (float64, error) {
	if err := l.cluster(tag, size); err != nil {
		return 0, err
	}
	c, err := l.nodes[0].client()
	if err != nil {
		return 0, err
	}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range *clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(*creates); i = next.Add(1) {
				if _, err := c.CoreV1().Services("default").Create(context.Background(), service(fmt.Sprintf("tp-%d", i)), metav1.CreateOptions{}); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		return 0, fmt.Errorf("%d of %d creates failed", failed.Load(), *creates)
	}
	return float64(*creates) / time.Since(start).Seconds(), nil
}

func service(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
}

// leader is the node whose etcd member leads, as the first node's etcd
// reports it.
func (l *lan) leader(size int) (*node, error) {
	nd := l.nodes[0]
	var port int
	data, err := os.ReadFile(filepath.Join(nd.dataDir, "etcd-ports"))
	if err != nil {
		return nil, err
	}
	fmt.Sscan(string(data), &port)
	pkiDir := filepath.Join(nd.dataDir, "pki", "etcd")
	info := transport.TLSInfo{CertFile: filepath.Join(pkiDir, "apiserver-client.crt"), KeyFile: filepath.Join(pkiDir, "apiserver-client.key"),
		TrustedCAFile: filepath.Join(pkiDir, "ca.crt")}
	tlsConfig, err := info.ClientConfig()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("https://127.0.0.1:%d", port)}, TLS: tlsConfig,
		DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return nd.dial(ctx, "tcp", addr)
		})}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		status, err1 := c.Status(ctx, c.Endpoints()[0])
		list, err2 := c.MemberList(ctx)
		cancel()
		if err1 == nil && err2 == nil && len(list.Members) == size {
			for _, m := range list.Members {
				for _, cand := range l.nodes {
					if m.ID == status.Leader && m.Name == cand.name {
						return cand, nil
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("no etcd leader of %d members in 1m", size)
}

// failovers kills the etcd leader's server runs times under the writers,
// restarting it after each, and returns how long writes were unavailable
// each time: the longest time after the kill without an acknowledged write.
func (l *lan) failovers(runs int) ([]time.Duration, error) {
	if err := l.cluster("fo", 3); err != nil {
		return nil, err
	}
	var gaps []time.Duration
	for run := range runs {
		leader, err := l.leader(3)
		if err != nil {
			return nil, err
		}
		var cs []kubernetes.Interface
		for _, nd := range l.nodes[:3] {
			if nd != leader {
				c, err := nd.client()
				if err != nil {
					return nil, err
				}
				cs = append(cs, c)
			}
		}
		w := startWriters(fmt.Sprintf("fo%d", run), cs)
		w.waitAcked(50)
		leader.kill()
		killed := time.Now()
		w.waitAcked(w.acked() + 200)
		w.stop()
		gap := w.longestGapAfter(killed)
		fmt.Printf("run %d: killed %s, writes unavailable %v\n", run+1, leader.name, gap.Round(10*time.Millisecond))
		gaps = append(gaps, gap)
		if err := l.start(leader, "fo", false, leader.args...); err != nil {
			return nil, err
		}
	}
	return gaps, nil
}

// writers create ConfigMaps through the clients and remember when each
// was acknowledged.
type writers struct {
	mu   sync.Mutex
	okAt []time.Time
	done chan struct{}
	wg   sync.WaitGroup
}

func startWriters(tag string, cs []kubernetes.Interface) *writers {
	w := &writers{done: make(chan struct{})}
	for i := range *nWriters {
		c := cs[i%len(cs)]
		w.wg.Go(func() {
			for seq := 0; ; seq++ {
				select {
				case <-w.done:
					return
				default:
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%d", tag, i, seq)}}
				if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				w.mu.Lock()
				w.okAt = append(w.okAt, time.Now())
				w.mu.Unlock()
			}
		})
	}
	return w
}

func (w *writers) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.okAt)
}

func (w *writers) waitAcked(n int) {
	for deadline := time.Now().Add(2 * time.Minute); w.acked() < n && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *writers) stop() {
	close(w.done)
	w.wg.Wait()
}

func (w *writers) longestGapAfter(since time.Time) time.Duration {
	w.mu.Lock()
	times := slices.Clone(w.okAt)
	w.mu.Unlock()
	slices.SortFunc(times, time.Time.Compare)
	var gap time.Duration
	prev := since
	for _, at := range times {
		if at.After(since) {
			gap = max(gap, at.Sub(prev))
			prev = at
		}
	}
	return gap
}
