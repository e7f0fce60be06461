// Command agent benchmarks `portal agent`: pod start (create -> Ready with
// an exec readiness probe), many pods created at once on one node, how
// long a pod's readiness change takes to reach every node's proxy rules,
// and the agent's memory with those pods.
//
// run.sh starts it inside node1, a fresh network namespace, and names a
// second one, node2; the bench joins them with a veth. node1 runs
// `portal server` (API and controllers only), and each node runs `portal
// agent` and `portal proxy --proxy-mode nftables`. Pods get their own
// network namespaces from the agents; the bench kills their processes and
// run.sh removes the two node namespaces at the end.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"portal.dev/portal/bench/internal/host"
	"portal.dev/portal/bench/internal/node"
)

var (
	portal    = flag.String("portal", "bin/portal", "portal binary")
	dir       = flag.String("dir", "", "data directory (run.sh makes one)")
	startPods = flag.Int("start-pods", 30, "pods started one after the other")
	pods      = flag.Int("pods", 100, "pods created at once on node2")
	flips     = flag.Int("flips", 40, "readiness changes to time")
	settle    = flag.Duration("settle", 10*time.Second, "wait before reading the agents' RSS, without and with the pods")
)

const (
	ns         = "bench"
	node1IP    = "10.100.1.1"
	node2IP    = "10.100.1.2"
	apiURL     = "https://" + node1IP + ":6443"
	clusterCID = "10.244.0.0/16"
)

func main() {
	flag.Parse()
	if os.Getenv("PORTAL_BENCH_NETNS") == "" || os.Getenv("PORTAL_BENCH_NETNS2") == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "bench: run me through bench/agent/run.sh (it makes the network namespaces)")
		os.Exit(2)
	}
	b := &bench{node2: os.Getenv("PORTAL_BENCH_NETNS2"), procs: node.Procs{Dir: *dir}, ready: map[string]time.Time{}, readyCh: map[string]chan struct{}{}}
	err := b.run()
	b.stopAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	node2  string // node2's network namespace
	client kubernetes.Interface
	procs  node.Procs
	agents [2]*exec.Cmd

	mu       sync.Mutex
	ready    map[string]time.Time // pod name -> first seen Ready
	readyCh  map[string]chan struct{}
	statusCh chan statusEvent // Ready changes of the flip pods
}

type statusEvent struct {
	pod   string
	ready bool
	at    time.Time
	ltt   time.Time // the Ready condition's lastTransitionTime
}

func (b *bench) run() error {
	if err := b.network(); err != nil {
		return err
	}
	if _, err := b.procs.Start("server", "", *portal, "server", "--data-dir", filepath.Join(*dir, "server"),
		"--disable", "dns,proxy,agent,ingress", "--bind-address", "0.0.0.0", "--advertise-address", node1IP,
		"--node-monitor-grace-period", "1h"); err != nil {
		return err
	}
	if err := host.WaitHTTP(apiURL+"/readyz", 120*time.Second); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags(apiURL, filepath.Join(*dir, "server", "admin.kubeconfig"))
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = runtime.ContentTypeProtobuf
	b.client = kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := b.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i, ip := range []string{node1IP, node2IP} {
		if err := b.startNode(i+1, ip); err != nil {
			return err
		}
	}
	b.watchPods(ctx)
	fmt.Printf("# nodes up; cores: %d online, load before the bench: %s\n", host.NumCPU(), host.Loadavg())

	time.Sleep(*settle)
	base := [2]memory{readMemory(b.agents[0].Process.Pid), readMemory(b.agents[1].Process.Pid)}
	fmt.Printf("RESULT agent rss pods=0 node1 %s node2 %s\n", base[0], base[1])

	if err := b.podStart(ctx); err != nil {
		return err
	}
	if err := b.manyPods(ctx); err != nil {
		return err
	}
	return b.readinessFlips(ctx)
}

// network joins node1 (this namespace) and node2 with a veth; each is the
// other's default route, as in e2e's seeds scenario.
func (b *bench) network() error {
	return node.Run(
		[]string{"ip", "link", "set", "lo", "up"},
		[]string{"ip", "link", "add", "to-node2", "type", "veth", "peer", "name", "to-node1", "netns", b.node2},
		[]string{"ip", "addr", "add", node1IP + "/24", "dev", "to-node2"},
		[]string{"ip", "link", "set", "to-node2", "up"},
		[]string{"ip", "route", "add", "default", "via", node2IP},
		[]string{"ip", "netns", "exec", b.node2, "ip", "link", "set", "lo", "up"},
		[]string{"ip", "netns", "exec", b.node2, "ip", "addr", "add", node2IP + "/24", "dev", "to-node1"},
		[]string{"ip", "netns", "exec", b.node2, "ip", "link", "set", "to-node1", "up"},
		[]string{"ip", "netns", "exec", b.node2, "ip", "route", "add", "default", "via", node1IP},
	)
}

// startNode starts node i's agent and proxy with a node credential.
func (b *bench) startNode(i int, ip string) error {
	name := fmt.Sprintf("node%d", i)
	kc := filepath.Join(*dir, name+".kubeconfig")
	if err := node.Kubeconfig(*portal, filepath.Join(*dir, "server"), name, apiURL, kc); err != nil {
		return err
	}
	netns := ""
	if i == 2 {
		netns = b.node2
	}
	agent, err := b.procs.Start(name+"-agent", netns, *portal, "agent", "--kubeconfig", kc, "--hostname-override", name,
		"--node-ip", ip, "--pod-cidr", fmt.Sprintf("10.244.%d.0/24", i), "--cluster-cidr", clusterCID,
		"--root-dir", filepath.Join(*dir, name+"-agent"))
	if err != nil {
		return err
	}
	b.agents[i-1] = agent
	if _, err := b.procs.Start(name+"-proxy", netns, *portal, "proxy", "--kubeconfig", kc, "--hostname-override", name,
		"--proxy-mode", "nftables", "--cluster-cidr", clusterCID); err != nil {
		return err
	}
	// The agent's /healthz is on the node's loopback; the Node's Ready
	// condition says the same from here.
	if err := node.WaitReady(context.Background(), b.client, name, 60*time.Second); err != nil {
		return fmt.Errorf("%w (see %s)", err, filepath.Join(*dir, name+"-agent.log"))
	}
	return nil
}

func podReady(p *corev1.Pod) (bool, time.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// watchPods records when each pod is first seen Ready, and every Ready
// change of the flip pods.
func (b *bench) watchPods(ctx context.Context) {
	b.statusCh = make(chan statusEvent, 1024)
	f := informers.NewSharedInformerFactoryWithOptions(b.client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	last := map[string]bool{}
	on := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		ready, ltt := podReady(p)
		b.mu.Lock()
		defer b.mu.Unlock()
		if ready {
			if _, seen := b.ready[p.Name]; !seen {
				b.ready[p.Name] = now
				if ch := b.readyCh[p.Name]; ch != nil {
					close(ch)
				}
			}
		}
		if strings.HasPrefix(p.Name, "flip-") && last[p.Name] != ready {
			last[p.Name] = ready
			b.statusCh <- statusEvent{pod: p.Name, ready: ready, at: now, ltt: ltt}
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
}

// readyChan returns a channel closed when the pod is first seen Ready.
func (b *bench) readyChan(name string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	if _, seen := b.ready[name]; seen {
		close(ch)
	} else {
		b.readyCh[name] = ch
	}
	return ch
}

// benchPod runs `sleep` with an exec readiness probe (`test -e file`, or
// `true` when file is empty).
func benchPod(name, node, file string, period int32) *corev1.Pod {
	probe := []string{"true"}
	if file != "" {
		probe = []string{"test", "-e", file}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": strings.SplitN(name, "-", 2)[0]}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: "debian", Command: []string{"sleep", "infinity"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: probe}}}}}}}
}

// podStart creates pods on node1 one after the other, each once the one
// before is Ready, and reports create -> Ready.
func (b *bench) podStart(ctx context.Context) error {
	var lat []time.Duration
	cpu0, agent0 := readCPU(), host.CPU(b.agents[0].Process.Pid)
	for i := range *startPods {
		name := fmt.Sprintf("start-%d", i)
		ch := b.readyChan(name)
		t0 := time.Now()
		if _, err := b.client.CoreV1().Pods(ns).Create(ctx, benchPod(name, "node1", "", 10), metav1.CreateOptions{}); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			return fmt.Errorf("pod %s not Ready after 60s", name)
		}
		b.mu.Lock()
		lat = append(lat, b.ready[name].Sub(t0))
		b.mu.Unlock()
	}
	busy := readCPU().busySince(cpu0)
	agentCPU := host.CPU(b.agents[0].Process.Pid) - agent0
	slices.Sort(lat)
	fmt.Printf("RESULT pod-start n=%d p50=%s p90=%s max=%s min=%s cores_busy=%.0f%% agent_cpu_per_pod=%s\n", len(lat),
		ms(quantile(lat, 0.5)), ms(quantile(lat, 0.9)), ms(lat[len(lat)-1]), ms(lat[0]), busy*100,
		ms(agentCPU/time.Duration(len(lat))))
	return b.deleteAll(ctx, "start")
}

// manyPods creates the pods on node2 at once (32 parallel creates) and
// times until all are Ready, then reads the agent's memory.
func (b *bench) manyPods(ctx context.Context) error {
	chans := make([]<-chan struct{}, *pods)
	for i := range *pods {
		chans[i] = b.readyChan(fmt.Sprintf("many-%d", i))
	}
	cpu0, agent0 := readCPU(), host.CPU(b.agents[1].Process.Pid)
	t0 := time.Now()
	work := make(chan int)
	errs := make(chan error, *pods)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := b.client.CoreV1().Pods(ns).Create(ctx, benchPod(fmt.Sprintf("many-%d", i), "node2", "", 10), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range *pods {
		work <- i
	}
	close(work)
	wg.Wait()
	created := time.Since(t0)
	select {
	case err := <-errs:
		return err
	default:
	}
	for i, ch := range chans {
		select {
		case <-ch:
		case <-time.After(120 * time.Second):
			return fmt.Errorf("pod many-%d not Ready 120s after the creates", i)
		}
	}
	all := time.Since(t0)
	busy := readCPU().busySince(cpu0)
	agentCPU := host.CPU(b.agents[1].Process.Pid) - agent0
	var lat []time.Duration
	b.mu.Lock()
	for i := range *pods {
		lat = append(lat, b.ready[fmt.Sprintf("many-%d", i)].Sub(t0))
	}
	b.mu.Unlock()
	slices.Sort(lat)
	fmt.Printf("RESULT many-pods n=%d all_ready=%s creates_took=%s first_ready=%s p50_ready=%s cores_busy=%.0f%% agent_cpu=%s\n",
		*pods, ms(all), ms(created), ms(lat[0]), ms(quantile(lat, 0.5)), busy*100, ms(agentCPU))
	time.Sleep(*settle)
	m := readMemory(b.agents[1].Process.Pid)
	fmt.Printf("RESULT agent rss pods=%d node2 %s\n", *pods, m)
	return b.deleteAll(ctx, "many")
}

// readinessFlips puts one pod on each node behind a Service and flips
// their readiness (the file their exec probe tests) one at a time; it
// times until both proxies' rules show the change.
func (b *bench) readinessFlips(ctx context.Context) error {
	files := filepath.Join(*dir, "ready")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return err
	}
	names := []string{"flip-0", "flip-1"}
	for _, n := range names {
		os.WriteFile(filepath.Join(files, n), nil, 0o644)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "flip"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "flip"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := b.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	ips := map[string]string{}
	for i, n := range names {
		ch := b.readyChan(n)
		if _, err := b.client.CoreV1().Pods(ns).Create(ctx, benchPod(n, fmt.Sprintf("node%d", i+1), filepath.Join(files, n), 1), metav1.CreateOptions{}); err != nil {
			return err
		}
		<-ch
		p, err := b.client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ips[n] = p.Status.PodIP
	}
	mons := []*ruleMonitor{newRuleMonitor("node1", ""), newRuleMonitor("node2", b.node2)}
	for _, m := range mons {
		if err := m.start(); err != nil {
			return err
		}
		defer m.stop()
	}
	// Both endpoints in both proxies' rules before the first flip.
	for _, m := range mons {
		for _, n := range names {
			if _, err := m.wait(ips[n]+":8080", true, time.Now(), 30*time.Second); err != nil {
				return err
			}
		}
	}
	// Drain Ready events of the setup.
	for len(b.statusCh) > 0 {
		<-b.statusCh
	}
	var fromChange, fromStatus, fromLTT []time.Duration
	cpu0 := readCPU()
	ready := map[string]bool{"flip-0": true, "flip-1": true}
	for i := range *flips {
		n := names[i%2]
		// Start at a random phase of the probe's 1 s period.
		time.Sleep(1500*time.Millisecond + rand.N(time.Second))
		want := !ready[n]
		t0 := time.Now()
		var err error
		if want {
			err = os.WriteFile(filepath.Join(files, n), nil, 0o644)
		} else {
			err = os.Remove(filepath.Join(files, n))
		}
		if err != nil {
			return err
		}
		ready[n] = want
		var ev statusEvent
		select {
		case ev = <-b.statusCh:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("flip %d: pod %s not %v after 10s", i, n, want)
		}
		if ev.pod != n || ev.ready != want {
			return fmt.Errorf("flip %d: got status event %+v, want %s ready=%v", i, ev, n, want)
		}
		for _, m := range mons {
			at, err := m.wait(ips[n]+":8080", want, t0, 10*time.Second)
			if err != nil {
				return fmt.Errorf("flip %d (%s ready=%v): %w", i, n, want, err)
			}
			fromChange = append(fromChange, at.Sub(t0))
			fromStatus = append(fromStatus, at.Sub(ev.at))
			fromLTT = append(fromLTT, at.Sub(ev.ltt))
		}
	}
	busy := readCPU().busySince(cpu0)
	for _, s := range []struct {
		name string
		d    []time.Duration
	}{{"probe-outcome-change", fromChange}, {"ready-status-seen", fromStatus}, {"lastTransitionTime", fromLTT}} {
		slices.Sort(s.d)
		fmt.Printf("RESULT readiness-to-rules from=%s n=%d p50=%s p90=%s p99=%s max=%s cores_busy=%.0f%%\n", s.name, len(s.d),
			ms(quantile(s.d, 0.5)), ms(quantile(s.d, 0.9)), ms(quantile(s.d, 0.99)), ms(s.d[len(s.d)-1]), busy*100)
	}
	return nil
}

// deleteAll deletes the pods whose names start with prefix and waits
// until they are gone.
func (b *bench) deleteAll(ctx context.Context, prefix string) error {
	list, err := b.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix+"-") {
			if err := b.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := b.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left := 0
		for _, p := range list.Items {
			if strings.HasPrefix(p.Name, prefix+"-") {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("pods %s-* not gone after 2m", prefix)
}

// ruleMonitor follows one node's nftables with `nft monitor`: after each
// committed transaction it lists the proxy's table, so it knows when a
// rule to an endpoint appeared or went, to the transaction.
type ruleMonitor struct {
	node, netns string
	cmd         *exec.Cmd

	mu    sync.Mutex
	snaps []snapshot
	more  chan struct{} // closed and replaced on each snapshot
}

// snapshot is the proxy's table right after a transaction.
type snapshot struct {
	at    time.Time
	rules string
}

func newRuleMonitor(node, netns string) *ruleMonitor {
	return &ruleMonitor{node: node, netns: netns, more: make(chan struct{})}
}

func nftCommand(netns string, args ...string) *exec.Cmd {
	if netns == "" {
		return exec.Command("nft", args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", netns, "nft"}, args...)...)
}

func (m *ruleMonitor) start() error {
	m.cmd = nftCommand(m.netns, "monitor")
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := m.cmd.Start(); err != nil {
		return err
	}
	m.record(time.Now())
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "# new generation") {
				m.record(time.Now())
			}
		}
	}()
	return nil
}

func (m *ruleMonitor) record(at time.Time) {
	out, _ := nftCommand(m.netns, "list", "table", "ip", "portal").Output()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snaps = append(m.snaps, snapshot{at: at, rules: string(out)})
	close(m.more)
	m.more = make(chan struct{})
}

func (m *ruleMonitor) stop() {
	m.cmd.Process.Kill()
	m.cmd.Wait()
}

// dnats says whether rules DNAT to target ("ip:port"): a rule of its
// own (affinity Services), or an element of a shared endpoint map
// ("slot : ip . port"), which the proxy's rules pick from.
func dnats(rules, target string) bool {
	if strings.Contains(rules, "to "+target+"\n") || strings.Contains(rules, "to "+target+" ") {
		return true
	}
	i := strings.LastIndexByte(target, ':')
	elem := ": " + target[:i] + " . " + target[i+1:]
	return strings.Contains(rules, elem+",") || strings.Contains(rules, elem+" ") || strings.Contains(rules, elem+"\n")
}

// wait returns the time of the first transaction at or after since after
// which the rules DNAT to target (present) or no longer do; since itself
// when they already did before it.
func (m *ruleMonitor) wait(target string, present bool, since time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	seen := 0
	for {
		m.mu.Lock()
		snaps, more := m.snaps, m.more
		m.mu.Unlock()
		if seen == 0 {
			// The state at since is that of the last transaction before it.
			for seen < len(snaps) && snaps[seen].at.Before(since) {
				seen++
			}
			if seen > 0 && dnats(snaps[seen-1].rules, target) == present {
				return since, nil
			}
		}
		for ; seen < len(snaps); seen++ {
			if dnats(snaps[seen].rules, target) == present {
				return snaps[seen].at, nil
			}
		}
		select {
		case <-more:
		case <-deadline:
			return time.Time{}, fmt.Errorf("%s: rules to %s present=%v not seen within %v", m.node, target, present, timeout)
		}
	}
}

// stopAll stops the components, then kills every pod process the
// agents' state files list.
func (b *bench) stopAll() {
	roots, _ := filepath.Glob(filepath.Join(*dir, "node*-agent"))
	b.procs.Stop(roots...)
}

// memory is a process's resident set from /proc/PID/status. From
// smaps_rollup: FilePmdMapped, the part of the file-backed pages mapped
// 2 MiB at a time (large folios of the binary in the page cache); Pss,
// the resident set with each shared page divided among the processes
// mapping it (here the node's other portal processes); and the private
// pages (mapped by this process alone).
type memory struct{ rss, anon, file, shmem, filePMD, pss, private float64 }

func (m memory) String() string {
	return fmt.Sprintf("rss_mib=%.1f anon_mib=%.1f file_mib=%.1f file_pmd_mapped_mib=%.1f pss_mib=%.1f private_mib=%.1f",
		m.rss, m.anon, m.file+m.shmem, m.filePMD, m.pss, m.private)
}

func readMemory(pid int) memory {
	st := host.MiB(pid, "status")
	sm := host.MiB(pid, "smaps_rollup")
	return memory{rss: st["VmRSS"], anon: st["RssAnon"], file: st["RssFile"], shmem: st["RssShmem"],
		filePMD: sm["FilePmdMapped"], pss: sm["Pss"], private: sm["Private_Clean"] + sm["Private_Dirty"]}
}

// cpuStat is the machine's busy and total jiffies from /proc/stat.
type cpuStat struct{ busy, total float64 }

func readCPU() cpuStat {
	data, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(data), "\n")
	var s cpuStat
	for i, v := range strings.Fields(line)[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		s.total += x
		if i != 3 && i != 4 { // idle, iowait
			s.busy += x
		}
	}
	return s
}

// busySince is the fraction of all cores busy since s0, whatever ran.
func (s cpuStat) busySince(s0 cpuStat) float64 {
	return (s.busy - s0.busy) / (s.total - s0.total)
}

func quantile(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
