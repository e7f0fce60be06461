// Command explain times `portal explain svc/NAME` on a cluster of N
// Services and M ready Pods (status written by the bench, as an agent
// would) spread over nodes that are Ready but have no agent, so every
// node's question fails fast, as on a node whose agent is gone.
//
// Anchor, in the same run: the API reads kubectl needs to show the same
// Service and its slices (get the Service, list its EndpointSlices by
// label), so the ratio says what the diagnosis costs on top of a look.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"portal.dev/portal/explain"

	"portal.dev/portal/bench/internal/host"
)

var (
	portal   = flag.String("portal", "bin/portal", "portal binary")
	core     = flag.String("server-core", "0", "CPU for the server")
	services = flag.Int("services", 1000, "Services")
	podsPer  = flag.Int("pods-per-service", 10, "ready Pods per Service")
	nodes    = flag.Int("nodes", 10, "Ready nodes without agents")
	runs     = flag.Int("runs", 20, "explains to time")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "portal-bench-explain-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	srv := exec.Command("taskset", "-c", *core, *portal, "server", "--data-dir", dir, "--secure-port", "16997",
		"--disable", "dns,proxy,agent,ingress", "--node-monitor-grace-period", "1h")
	srv.Stdout, srv.Stderr = f, f
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	if err := host.WaitHTTP("https://127.0.0.1:16997/readyz", 90*time.Second); err != nil {
		return err
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
	if err := populate(ctx, client); err != nil {
		return err
	}
	if err := waitEndpoints(ctx, client, *services**podsPer); err != nil {
		return err
	}
	fmt.Printf("# %d Services, %d ready Pods, %d nodes ready in %s\n", *services, *services**podsPer, *nodes, time.Since(t0).Round(time.Second))

	e := explain.New(explain.Config{Client: client})
	var took, anchor []time.Duration
	for i := range *runs {
		name := fmt.Sprintf("s%d", i*(*services)/(*runs))
		start := time.Now()
		if _, err := client.CoreV1().Services("bench").Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := client.DiscoveryV1().EndpointSlices("bench").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name}); err != nil {
			return err
		}
		anchor = append(anchor, time.Since(start))
		start = time.Now()
		r, err := e.Explain(ctx, "bench", "svc/"+name)
		if err != nil {
			return err
		}
		took = append(took, time.Since(start))
		if i == 0 {
			explain.WriteText(os.Stdout, r)
		}
	}
	slices.Sort(took)
	slices.Sort(anchor)
	fmt.Printf("RESULT explain services=%d pods=%d nodes=%d runs=%d p50=%s max=%s\n", *services, *services**podsPer, *nodes, len(took),
		took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	fmt.Printf("RESULT anchor get+list p50=%s; explain/anchor=%.1fx\n", anchor[len(anchor)/2].Round(time.Millisecond),
		float64(took[len(took)/2])/float64(anchor[len(anchor)/2]))
	return nil
}

// populate creates the nodes (Ready, each at a loopback address where no
// agent listens), the Services and their Pods with Ready status.
func populate(ctx context.Context, c kubernetes.Interface) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range *nodes {
		name := fmt.Sprintf("n%d", i)
		if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		// The node controllers write a new Node too (its podCIDR).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status = corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("127.0.9.%d", i+1)}},
				Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
				DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}}
			_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return err
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 32 {
		wg.Go(func() {
			for i := range work {
				if err := createOne(ctx, c, i); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range *services {
		work <- i
	}
	close(work)
	wg.Wait()
	return firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func createOne(ctx context.Context, c kubernetes.Interface, i int) error {
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
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", n%*nodes),
				Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"sleep"}}}}}
		p, err := c.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		ip := fmt.Sprintf("10.%d.%d.%d", 100+n/65536, n/256%256, n%256)
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err = c.CoreV1().Pods("bench").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitEndpoints polls the slices until total endpoints are ready.
func waitEndpoints(ctx context.Context, c kubernetes.Interface, total int) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.DiscoveryV1().EndpointSlices("bench").List(ctx, metav1.ListOptions{})
		if err == nil {
			ready := 0
			for _, s := range list.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready == nil || *e.Conditions.Ready {
						ready++
					}
				}
			}
			if ready == total {
				return nil
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("endpoints not all ready after 10 minutes")
}
