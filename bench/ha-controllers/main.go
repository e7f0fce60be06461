// Command ha-controllers measures controller failover: two controller-managers run
// against one API server; the one holding the Lease is killed with -9, and
// the time until the other acts again (a Service created right after the
// kill gets its EndpointSlice) is taken over several runs, with the
// default leader-election settings. It prints p50 and max of the takeover
// and of the first action.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
)

var (
	portal = flag.String("portal", "bin/portal", "portal binary")
	runs   = flag.Int("runs", 10, "leaders to kill")
	keep   = flag.Bool("keep", false, "keep the data directory and logs")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func start(log string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(*portal, args...)
	f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}

func run() error {
	dir, err := os.MkdirTemp("", "portal-bench-ha-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Println("# data and logs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	port, err := host.FreePort()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	srv, err := start(filepath.Join(dir, "server.log"), "server", "--data-dir", dir, "--bind-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(port), "--disable", "controllers,dns,proxy,agent,ingress")
	if err != nil {
		return err
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := host.WaitHTTP(url+"/readyz", 90*time.Second); err != nil {
		return err
	}
	kc := filepath.Join(dir, "cm.kubeconfig")
	if out, err := exec.Command(*portal, "kubeconfig", "--data-dir", dir, "--user", "system:kube-controller-manager",
		"--server", url, "-o", kc).CombinedOutput(); err != nil {
		return fmt.Errorf("kubeconfig: %v: %s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	cms := map[string]*exec.Cmd{}
	startCM := func(id string) error {
		cm, err := start(filepath.Join(dir, id+".log"), "controller-manager", "--kubeconfig", kc, "--identity", id,
			"--node-monitor-grace-period", "1h", "--metrics-bind-address", "")
		cms[id] = cm
		return err
	}
	for _, id := range []string{"cm-a", "cm-b"} {
		if err := startCM(id); err != nil {
			return err
		}
	}
	defer func() {
		for _, cm := range cms {
			cm.Process.Kill()
			cm.Wait()
		}
	}()
	var takeovers, actions []time.Duration
	for i := range *runs {
		takeover, action, err := failover(ctx, client, cms, i)
		if err != nil {
			return err
		}
		takeovers, actions = append(takeovers, takeover.leader), append(actions, action)
		fmt.Printf("run %d: %s killed; %s took the Lease after %s, acted after %s\n", i+1, takeover.killed, takeover.by,
			takeover.leader.Round(10*time.Millisecond), action.Round(10*time.Millisecond))
		if err := startCM(takeover.killed); err != nil {
			return err
		}
	}
	report("takeover", takeovers)
	report("controllers-acting", actions)
	return nil
}

func report(what string, d []time.Duration) {
	slices.Sort(d)
	fmt.Printf("RESULT %s runs=%d p50=%s max=%s (goal < 10s)\n", what, len(d),
		d[len(d)/2].Round(10*time.Millisecond), d[len(d)-1].Round(10*time.Millisecond))
}

type takeover struct {
	killed, by string
	leader     time.Duration
}

func holder(ctx context.Context, c kubernetes.Interface) string {
	lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "portal-controller-manager", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// failover waits for a steady leader, kills it, creates a Service with a
// ready Pod at once, and times the new Lease holder and the Service's
// EndpointSlice.
func failover(ctx context.Context, c kubernetes.Interface, cms map[string]*exec.Cmd, i int) (takeover, time.Duration, error) {
	var leader string
	for deadline := time.Now().Add(2 * time.Minute); cms[leader] == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return takeover{}, 0, fmt.Errorf("no leader after 2m")
		}
		leader = holder(ctx, c)
	}
	cms[leader].Process.Kill()
	cms[leader].Wait()
	killed := time.Now()
	name := fmt.Sprintf("run-%d", i)
	if err := serve(ctx, c, name, fmt.Sprintf("10.9.%d.1", i)); err != nil {
		return takeover{}, 0, err
	}
	t := takeover{killed: leader}
	var action time.Duration
	for deadline := killed.Add(2 * time.Minute); t.leader == 0 || action == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return takeover{}, 0, fmt.Errorf("run %d: no failover after 2m", i)
		}
		if h := holder(ctx, c); t.leader == 0 && h != "" && h != leader {
			t.leader, t.by = time.Since(killed), h
		}
		slices, err := c.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + name})
		if action == 0 && err == nil && len(slices.Items) > 0 && len(slices.Items[0].Endpoints) > 0 {
			action = time.Since(killed)
		}
	}
	return t, action, nil
}

// serve creates a Service and a ready Pod of it on node n1.
func serve(ctx context.Context, c kubernetes.Interface, name, ip string) error {
	labels := map[string]string{"app": name}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Selector: labels,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	created, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Status.Phase, created.Status.PodIP = corev1.PodRunning, ip
	created.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}
