// Command portforward benchmarks `kubectl port-forward` through Portal:
// downloads of one large file from a pod, straight from the pod's IP (the
// anchor) and through the real kubectl's port-forward to pod/NAME and to
// svc/NAME, in alternation, with the CPU time kubectl, the API server and
// the agent spend per MiB carried. A second anchor is the bound: kubectl
// port-forwarding from an in-process peer that serves the file from
// memory, which is what kubectl alone can move.
//
// run.sh starts it inside a fresh network namespace, the node; the bench
// gives the node an address on a veth (both ends its own) and runs `portal server` (API
// and controllers) and `portal agent` there. The pod serves the file with
// this same binary (-serve), through sendfile, so the anchor is bound by
// the kernel rather than by the server.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"portal.dev/portal/bench/internal/host"
	"portal.dev/portal/bench/internal/node"
)

var (
	portal  = flag.String("portal", "bin/portal", "portal binary")
	kubectl = flag.String("kubectl", "", "kubectl binary (default: kubectl on PATH, else `portal kubectl`)")
	dir     = flag.String("dir", "", "data directory (run.sh makes one)")
	sizeMiB = flag.Int("size", 200, "size of the file downloaded, MiB")
	rounds  = flag.Int("rounds", 5, "rounds of anchor, pod/NAME, svc/NAME downloads")
	serve   = flag.String("serve", "", "serve this directory on :8080 (what the pod runs)")
	useSPDY = flag.Bool("spdy", false, "make kubectl use its SPDY fallback instead of WebSockets")
)

const (
	ns      = "default"
	nodeIP  = "10.100.1.1"
	apiURL  = "https://" + nodeIP + ":6443"
	podPort = 8080
)

func main() {
	flag.Parse()
	if *serve != "" {
		fmt.Fprintln(os.Stderr, http.ListenAndServe(fmt.Sprintf(":%d", podPort), http.FileServer(http.Dir(*serve))))
		os.Exit(1)
	}
	if os.Getenv("PORTAL_BENCH_NETNS") == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "bench: run me through bench/portforward/run.sh (it makes the network namespace)")
		os.Exit(2)
	}
	b := &bench{procs: node.Procs{Dir: *dir}}
	err := b.run()
	b.stopAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	client kubernetes.Interface
	procs  node.Procs
	server *exec.Cmd
	agent  *exec.Cmd
	podIP  string
}

func (b *bench) run() error {
	err := node.Run(
		[]string{"ip", "link", "set", "lo", "up"},
		[]string{"ip", "link", "add", "node0", "type", "veth", "peer", "name", "node0-peer"},
		[]string{"ip", "addr", "add", nodeIP + "/24", "dev", "node0"},
		[]string{"ip", "link", "set", "node0", "up"},
		[]string{"ip", "link", "set", "node0-peer", "up"},
	)
	if err != nil {
		return err
	}
	if err := b.startComponents(); err != nil {
		return err
	}
	if err := b.startPod(); err != nil {
		return err
	}
	fmt.Printf("# pod up at %s; cores: %d online, load before the bench: %s\n", b.podIP, host.NumCPU(), host.Loadavg())
	return b.measure()
}

// startComponents starts the API server and the node's agent and waits
// for the node to be Ready.
func (b *bench) startComponents() error {
	var err error
	if b.server, err = b.procs.Start("server", "", *portal, "server", "--data-dir", filepath.Join(*dir, "server"),
		"--disable", "dns,proxy,agent,ingress", "--bind-address", "0.0.0.0", "--advertise-address", nodeIP); err != nil {
		return err
	}
	if err := host.WaitHTTP(apiURL+"/readyz", 120*time.Second); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags(apiURL, filepath.Join(*dir, "server", "admin.kubeconfig"))
	if err != nil {
		return err
	}
	b.client = kubernetes.NewForConfigOrDie(cfg)
	kc := filepath.Join(*dir, "node1.kubeconfig")
	if err := node.Kubeconfig(*portal, filepath.Join(*dir, "server"), "node1", apiURL, kc); err != nil {
		return err
	}
	if b.agent, err = b.procs.Start("agent", "", *portal, "agent", "--kubeconfig", kc, "--hostname-override", "node1",
		"--node-ip", nodeIP, "--pod-cidr", "10.244.1.0/24", "--cluster-cidr", "10.244.0.0/16",
		"--root-dir", filepath.Join(*dir, "node1-agent")); err != nil {
		return err
	}
	if err := node.WaitReady(context.Background(), b.client, "node1", 60*time.Second); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, *dir)
	}
	return nil
}

// startPod writes the file, creates the pod serving it and its Service,
// and waits for the pod to be Ready.
func (b *bench) startPod() error {
	files := filepath.Join(*dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(files, "big"))
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, rand.Reader, int64(*sizeMiB)<<20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "debian",
			Command: []string{self, "-serve", files},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: podPort}},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(podPort)}}}}}}}
	ctx := context.Background()
	if _, err := b.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := b.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	return waitFor(60*time.Second, "pod web Ready", func() bool {
		p, err := b.client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		b.podIP = p.Status.PodIP
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// stopAll stops the components, then kills the pod's processes.
func (b *bench) stopAll() {
	b.procs.Stop(filepath.Join(*dir, "node1-agent"))
}

func waitFor(timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v (logs in %s)", what, timeout, *dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
