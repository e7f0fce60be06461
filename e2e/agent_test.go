package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// The agent test bed: one node namespace running `portal server` (API and
// controllers only) and `portal agent` for node1, whose pods get
// 10.244.1.0/24 behind portal0; a client namespace reaches the node over a
// veth and routes the pod range through it.
//
// node2 runs a second agent (pods in 10.244.2.0/24), joined to node1 by
// the link 10.100.1.0/24, which the nodes' InternalIPs are on; it reaches
// the API through a forwarder the test runs.
const (
	agentNodeIP   = "10.100.1.1"
	agentNode2IP  = "10.100.1.2"
	agentClientIP = "10.100.0.2"
	agentPodCIDR  = "10.244.1.0/24"
	agentPod2CIDR = "10.244.2.0/24"
)

type agentBed struct {
	t       *testing.T
	node    *testbed.NS
	node2   *testbed.NS
	client  *testbed.NS
	server  *framework.Server
	c       kubernetes.Interface
	rootDir string
	log     *os.File
	agent   *exec.Cmd
	// agentKC is node1's agent's kubeconfig, for user system:node:node1.
	agentKC string
	// agentArgs are more flags for node1's agent.
	agentArgs []string
}

func newAgentBed(t *testing.T) *agentBed {
	b := testbed.New(t)
	ab := &agentBed{t: t, rootDir: t.TempDir()}
	// Registered after the bed's, so it runs first: pod processes live in
	// their own namespaces, out of the bed's reach.
	t.Cleanup(ab.killPods)
	ab.node = b.Namespace("node")
	ab.client = b.Namespace("client")
	ab.node2 = b.Namespace("node2")
	b.Link(ab.node, "10.100.0.1/24", ab.client, agentClientIP+"/24")
	b.Link(ab.node, agentNodeIP+"/24", ab.node2, agentNode2IP+"/24")
	ab.node.MustRun("ip", "route", "add", "default", "via", agentClientIP)
	ab.node2.MustRun("ip", "route", "add", "default", "via", agentNodeIP)
	ab.client.MustRun("ip", "route", "add", "10.244.0.0/16", "via", "10.100.0.1")
	ab.server = startAPIServer(t, ab.node)
	ab.c = ab.server.Client()
	ab.agentKC = ab.server.UserKubeconfig(t, "system:node:node1", ab.server.URL())
	var err error
	if ab.log, err = os.Create(filepath.Join(ab.rootDir, "agent.log")); err != nil {
		t.Fatal(err)
	}
	logAgentOnFailure(t, "the agent log", ab.log.Name(), 80)
	// Off, as on a node that never loaded br_netfilter: the agent must
	// turn it on (TestAgent checks).
	ab.node.MustRun("sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0")
	ab.startAgent()
	forwardAPI(t, ab.server, ab.node, ab.node2)
	log2, err := os.Create(filepath.Join(ab.rootDir, "agent2.log"))
	if err != nil {
		t.Fatal(err)
	}
	ab.node2.Start(log2, framework.Binary(t), "agent", "--kubeconfig", ab.server.UserKubeconfig(t, "system:node:node2", ab.server.URL()),
		"--hostname-override", "node2", "--node-ip", agentNode2IP, "--pod-cidr", agentPod2CIDR,
		"--root-dir", filepath.Join(ab.rootDir, "agent2"), "-v=2")
	return ab
}

func (ab *agentBed) startAgent() {
	ab.t.Helper()
	args := append([]string{"agent", "--kubeconfig", ab.agentKC,
		"--hostname-override", "node1", "--node-ip", agentNodeIP, "--pod-cidr", agentPodCIDR,
		"--node-labels", "topology.kubernetes.io/zone=zone-a", "--root-dir", filepath.Join(ab.rootDir, "agent"), "-v=2"}, ab.agentArgs...)
	ab.agent = ab.node.Start(ab.log, framework.Binary(ab.t), args...)
}

func (ab *agentBed) killAgent() {
	ab.agent.Process.Kill()
	ab.agent.Wait()
}

// restartAgent kills node1's agent and starts it again, and returns once
// the new one says it is ready: it has adopted the pods of the old one.
func (ab *agentBed) restartAgent() {
	ab.t.Helper()
	readyLines := func() int {
		data, _ := os.ReadFile(ab.log.Name())
		return strings.Count(string(data), "Node agent ready")
	}
	before := readyLines()
	ab.killAgent()
	ab.startAgent()
	waitFor(ab.t, 30*time.Second, func() bool { return readyLines() > before })
}

// killPods kills every process the agents' state files list.
func (ab *agentBed) killPods() {
	roots, _ := filepath.Glob(filepath.Join(ab.rootDir, "agent*"))
	for _, root := range roots {
		agent.KillPods(root)
	}
}

func (ab *agentBed) create(pod *corev1.Pod) {
	ab.t.Helper()
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = "node1"
	}
	if _, err := ab.c.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		ab.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

func (ab *agentBed) get(name string) *corev1.Pod {
	p, err := ab.c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPod waits until cond holds for the pod, and returns it.
func (ab *agentBed) waitPod(name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	ab.t.Helper()
	deadline := time.Now().Add(timeout)
	var p *corev1.Pod
	for time.Now().Before(deadline) {
		if p = ab.get(name); p != nil && cond(p) {
			return p
		}
		time.Sleep(100 * time.Millisecond)
	}
	status := "gone"
	if p != nil {
		data, _ := json.MarshalIndent(p.Status, "", "  ")
		status = string(data)
	}
	ab.t.Fatalf("pod %s: not %s after %v; status:\n%s", name, what, timeout, status)
	return nil
}

func (ab *agentBed) logOf(p *corev1.Pod, container string) string {
	dir := "agent"
	if p.Spec.NodeName == "node2" {
		dir = "agent2"
	}
	data, _ := os.ReadFile(filepath.Join(ab.rootDir, dir, "pods", string(p.UID), "logs", container,
		fmt.Sprintf("%d.log", p.Status.ContainerStatuses[0].RestartCount)))
	return string(data)
}

func sh(name, script string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "debian", Command: []string{"sh", "-c", script}}}}}
}

func TestAgent(t *testing.T) {
	start := time.Now()
	ab := newAgentBed(t)
	ctx := context.Background()

	// 1. Node registration and heartbeat.
	var node *corev1.Node
	waitFor(t, 30*time.Second, func() bool {
		n, err := ab.c.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
		node = n
		return err == nil && len(n.Status.Conditions) > 0
	})
	if got := node.Labels["topology.kubernetes.io/zone"]; got != "zone-a" {
		t.Errorf("node zone label: got %q, want zone-a", got)
	}
	if got := node.Labels["kubernetes.io/hostname"]; got != "node1" {
		t.Errorf("node hostname label: got %q, want node1", got)
	}
	if len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Address != agentNodeIP {
		t.Errorf("node addresses: got %v, want InternalIP %s first", node.Status.Addresses, agentNodeIP)
	}
	if got := node.Spec.PodCIDR; got != agentPodCIDR {
		t.Errorf("node podCIDR: got %q, want %s", got, agentPodCIDR)
	}
	if _, ok := node.Status.Capacity[corev1.ResourcePods]; !ok {
		t.Errorf("node capacity: got %v, want pods", node.Status.Capacity)
	}
	// The Lease comes right after the Node (whose conditions may be there
	// from its creation): wait for it rather than race it.
	var firstRenew time.Time
	waitFor(t, 10*time.Second, func() bool {
		lease, err := ab.c.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node1", metav1.GetOptions{})
		if err == nil && lease.Spec.RenewTime != nil {
			firstRenew = lease.Spec.RenewTime.Time
		}
		return !firstRenew.IsZero()
	})
	waitFor(t, 10*time.Second, func() bool {
		n, err := ab.c.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
		for _, c := range n.Status.Conditions {
			if err == nil && c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	var err error

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "my-service"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if svc, err = ab.c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// stubborn's endpoints show how it drains.
	stubbornSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "stubborn"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "stubborn"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err = ab.c.CoreV1().Services("default").Create(ctx, stubbornSvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// 2. Pods as processes, each with an address of the pod CIDR.
	readyFile := filepath.Join(t.TempDir(), "ready")
	cleanExit := filepath.Join(t.TempDir(), "clean-exit")
	heartbeat := filepath.Join(t.TempDir(), "heartbeat")
	grpcServingFile := filepath.Join(t.TempDir(), "serving")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	python, _ := exec.LookPath("python3")
	pods := []*corev1.Pod{
		sh("sleeper", "exec sleep 3600"),
		func() *corev1.Pod { p := sh("hostnet", "exec sleep 3600"); p.Spec.HostNetwork = true; return p }(),
		func() *corev1.Pod {
			p := sh("env", "env; echo hostname=$(hostname); cat /etc/resolv.conf /etc/hosts; exec sleep 3600")
			p.Spec.Containers[0].Env = []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "URL", Value: "http://$(MY_SERVICE_SERVICE_HOST):$(MY_SERVICE_SERVICE_PORT)"},
			}
			return p
		}(),
		func() *corev1.Pod {
			p := sh("flappy", "exec sleep 3600")
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-e", readyFile}}}}
			return p
		}(),
		func() *corev1.Pod {
			p := sh("liveness", "exec sleep 3600")
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2, SuccessThreshold: 1, TimeoutSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9)}}}
			return p
		}(),
		func() *corev1.Pod {
			// This test binary, as a gRPC health server (see grpcHealthEnv).
			p := sh("grpc", "")
			c := &p.Spec.Containers[0]
			c.Command = []string{self}
			c.Env = []corev1.EnvVar{{Name: grpcHealthEnv, Value: ":9090"}, {Name: grpcHealthFileEnv, Value: grpcServingFile}}
			c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
			return p
		}(),
		sh("crasher", "echo crashing; exit 3"),
		func() *corev1.Pod {
			p := sh("done", "echo finished")
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			return p
		}(),
		func() *corev1.Pod { p := sh("nocmd", ""); p.Spec.Containers[0].Command = nil; return p }(),
		func() *corev1.Pod {
			p := sh("graceful", `trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done`)
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
			return p
		}(),
		func() *corev1.Pod {
			p := sh("stubborn", `trap '' TERM; while true; do sleep 0.1; done`)
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
			return p
		}(),
		func() *corev1.Pod {
			// patient ignores SIGTERM and has a minute to stop: the agent
			// stops while it terminates.
			p := sh("patient", `trap '' TERM; while true; do date +%s%N > `+heartbeat+`; sleep 0.1; done`)
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
			return p
		}(),
		func() *corev1.Pod {
			// squeezed's preStop hook takes its whole grace period; its
			// SIGTERM handler still gets 2 s before SIGKILL, as with kubelet.
			p := sh("squeezed", `trap 'sleep 0.5; echo clean > `+cleanExit+`; exit 0' TERM; while true; do sleep 0.1; done`)
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
			return p
		}(),
	}
	if python != "" {
		web := sh("web", "exec python3 -m http.server 8080 --bind 0.0.0.0")
		web.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}}
		pods = append(pods, web)
	} else {
		t.Log("python3 not found: the http.server pod is left out")
	}
	for _, p := range pods {
		ab.create(p)
	}
	cidr := netip.MustParsePrefix(agentPodCIDR)
	running := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podReady(p) && p.Status.PodIP != ""
	}
	seen := map[string]bool{}
	for _, name := range []string{"sleeper", "env", "graceful", "stubborn", "squeezed", "patient"} {
		p := ab.waitPod(name, 20*time.Second, "Running and Ready", running)
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !cidr.Contains(ip) || seen[p.Status.PodIP] {
			t.Errorf("pod %s: got pod IP %q, want a unique address of %s", name, p.Status.PodIP, cidr)
		}
		seen[p.Status.PodIP] = true
		if p.Status.HostIP != agentNodeIP {
			t.Errorf("pod %s: got host IP %q, want %s", name, p.Status.HostIP, agentNodeIP)
		}
	}
	if p := ab.waitPod("hostnet", 10*time.Second, "Running", running); p.Status.PodIP != agentNodeIP {
		t.Errorf("hostNetwork pod: got pod IP %s, want the node's %s", p.Status.PodIP, agentNodeIP)
	}
	t.Logf("pods running after %v", time.Since(start))

	// The pod network: the client reaches a pod through the node.
	if python != "" {
		web := ab.waitPod("web", 20*time.Second, "Ready (HTTP readiness probe)", running)
		if code, _ := httpGet(ab.client, "http://"+net.JoinHostPort(web.Status.PodIP, "8080")+"/"); code != 200 {
			t.Errorf("GET the web pod from the client: got status %d, want 200", code)
		}
		// Pod to pod across nodes, by pod IP, without NAT: node2's pod
		// reaches node1's through the route to node1's pod CIDR, and the
		// client reaches node2's pod through node1's route to node2's.
		fetch := sh("fetch", fmt.Sprintf(`python3 -c 'import urllib.request; print("status", urllib.request.urlopen("http://%s:8080/", timeout=5).status)'; exec python3 -m http.server 8080`, web.Status.PodIP))
		fetch.Spec.NodeName = "node2"
		ab.create(fetch)
		f := ab.waitPod("fetch", 20*time.Second, "Running on node2", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" })
		if ip := netip.MustParseAddr(f.Status.PodIP); !netip.MustParsePrefix(agentPod2CIDR).Contains(ip) {
			t.Errorf("pod on node2: got IP %s, want one of %s", ip, agentPod2CIDR)
		}
		waitFor(t, 10*time.Second, func() bool { return strings.Contains(ab.logOf(f, "main"), "status 200") })
		waitFor(t, 10*time.Second, func() bool {
			code, _ := httpGet(ab.client, "http://"+net.JoinHostPort(f.Status.PodIP, "8080")+"/")
			return code == 200
		})
	}

	// 4. Environment and 7. DNS, read back from the pod's own output.
	env := ab.waitPod("env", 5*time.Second, "running", running)
	out := ""
	waitFor(t, 5*time.Second, func() bool { out = ab.logOf(env, "main"); return strings.Contains(out, "hostname=") })
	for _, want := range []string{
		"MY_SERVICE_SERVICE_HOST=" + svc.Spec.ClusterIP,
		"MY_SERVICE_SERVICE_PORT=80",
		"MY_SERVICE_SERVICE_PORT_HTTP=80",
		"MY_SERVICE_PORT=tcp://" + svc.Spec.ClusterIP + ":80",
		"MY_SERVICE_PORT_80_TCP_ADDR=" + svc.Spec.ClusterIP,
		"URL=http://" + svc.Spec.ClusterIP + ":80",
		"KUBERNETES_SERVICE_HOST=",
		"POD_NAME=env",
		"POD_IP=" + env.Status.PodIP,
		"hostname=env",
		"search default.svc.cluster.local svc.cluster.local cluster.local",
		"nameserver 10.96.0.10",
		"options ndots:5",
		env.Status.PodIP + "\tenv",
	} {
		if !strings.Contains(out, want+"\n") && !strings.Contains(out, want) {
			t.Errorf("env pod output: no %q in:\n%s", want, out)
		}
	}

	// The log endpoint, with a client certificate of the cluster CA.
	if logs := ab.fetchLogs(t, "env", "main", "tailLines=1"); !strings.Contains(out, logs) || strings.Count(logs, "\n") != 1 {
		t.Errorf("log endpoint tailLines=1: got %q, want the last line of the output", logs)
	}

	// 5. Readiness follows the exec probe both ways.
	ab.waitPod("flappy", 10*time.Second, "Running, not Ready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && !podReady(p) })
	os.WriteFile(readyFile, nil, 0o644)
	ab.waitPod("flappy", 10*time.Second, "Ready once the probe passes", podReady)
	os.Remove(readyFile)
	ab.waitPod("flappy", 10*time.Second, "not Ready once the probe fails", func(p *corev1.Pod) bool { return !podReady(p) })

	// The same both ways with a gRPC health check.
	ab.waitPod("grpc", 10*time.Second, "Running, not Ready while NOT_SERVING", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && !podReady(p) && len(p.Status.ContainerStatuses) == 1 &&
			strings.Contains(ab.logOf(p, "main"), "serving gRPC health")
	})
	os.WriteFile(grpcServingFile, nil, 0o644)
	ab.waitPod("grpc", 10*time.Second, "Ready once the gRPC health check says SERVING", podReady)
	os.Remove(grpcServingFile)
	ab.waitPod("grpc", 10*time.Second, "not Ready once it says NOT_SERVING", func(p *corev1.Pod) bool { return !podReady(p) })

	// Liveness failure restarts; a crashing container backs off.
	ab.waitPod("liveness", 20*time.Second, "restarted by its liveness probe", func(p *corev1.Pod) bool {
		s := p.Status.ContainerStatuses
		return len(s) == 1 && s[0].RestartCount >= 1 && s[0].LastTerminationState.Terminated != nil &&
			strings.Contains(s[0].LastTerminationState.Terminated.Message, "liveness")
	})
	ab.waitPod("crasher", 20*time.Second, "in CrashLoopBackOff", func(p *corev1.Pod) bool {
		s := p.Status.ContainerStatuses
		return len(s) == 1 && s[0].RestartCount >= 1 && s[0].State.Waiting != nil && s[0].State.Waiting.Reason == "CrashLoopBackOff" &&
			s[0].LastTerminationState.Terminated != nil && s[0].LastTerminationState.Terminated.ExitCode == 3
	})
	// Events tell why, as kubelet's do: `kubectl describe pod` shows them.
	for _, want := range []struct{ pod, reason, message string }{
		{"sleeper", "Started", "Started container main"},
		{"crasher", "BackOff", "Back-off restarting failed container main in pod crasher"},
		{"flappy", "Unhealthy", "Readiness probe failed: "},
		{"liveness", "Killing", "Container main failed liveness probe, will be restarted"},
		{"nocmd", "Failed", "Error: Portal runs processes, not images"},
	} {
		eventually(t, want.pod+" has a "+want.reason+" event", func() (bool, string) {
			list, err := ab.c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + want.pod})
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for _, e := range list.Items {
				if e.Reason == want.reason && strings.HasPrefix(e.Message, want.message) && e.Source.Component == "kubelet" && e.Source.Host == "node1" {
					return true, ""
				}
				got = append(got, e.Reason+": "+e.Message)
			}
			return false, strings.Join(got, "; ")
		})
	}
	if out := ab.server.MustKubectl("describe", "pod", "crasher"); !strings.Contains(out, "Back-off restarting failed container main") {
		t.Errorf("kubectl describe pod crasher: no back-off event in:\n%s", out)
	}
	ab.waitPod("done", 10*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	ab.waitPod("nocmd", 10*time.Second, "waiting with reason NoCommand", func(p *corev1.Pod) bool {
		s := p.Status.ContainerStatuses
		return len(s) == 1 && s[0].State.Waiting != nil && s[0].State.Waiting.Reason == "NoCommand"
	})

	// Bridged traffic between pods goes through netfilter, or replies from
	// a Service's backend to a client pod on the same node keep their DNAT.
	if got := strings.TrimSpace(ab.node.MustRun("sysctl", "-n", "net.bridge.bridge-nf-call-iptables")); got != "1" {
		t.Errorf("node's net.bridge.bridge-nf-call-iptables: got %s, want 1 (the agent turns it on)", got)
	}

	// 3. Masquerade for traffic leaving the cluster, in the agent's own table.
	if out := ab.node.MustRun("nft", "list", "table", "inet", "portal-agent"); !strings.Contains(out, "ip saddr "+agentPodCIDR+" ip daddr != @cluster4 masquerade") {
		t.Errorf("nftables table portal-agent: got\n%s\nwant a masquerade rule for %s", out, agentPodCIDR)
	}

	// 8. An agent restart leaves the pods running and adopts them.
	before := ab.get("sleeper")
	done := ab.get("done")
	ab.restartAgent()
	after := ab.waitPod("sleeper", 10*time.Second, "still Running and Ready", running)
	if after.Status.ContainerStatuses[0].RestartCount != 0 || after.Status.PodIP != before.Status.PodIP ||
		!after.Status.ContainerStatuses[0].State.Running.StartedAt.Equal(&before.Status.ContainerStatuses[0].State.Running.StartedAt) {
		t.Errorf("sleeper after the agent restart: got %+v, want the same run as before %+v", after.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0])
	}
	// Probes of adopted containers run again.
	os.WriteFile(readyFile, nil, 0o644)
	ab.waitPod("flappy", 10*time.Second, "Ready after the agent restart once its probe passes", podReady)
	// Regression: a restarted agent ran a Succeeded pod again.
	if got := ab.get("done"); got.Status.Phase != corev1.PodSucceeded || got.Status.ContainerStatuses[0].State.Terminated == nil ||
		!got.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Equal(&done.Status.ContainerStatuses[0].State.Terminated.FinishedAt) {
		t.Errorf("finished pod after the agent restart: got %s %+v, want it left Succeeded as %+v",
			got.Status.Phase, got.Status.ContainerStatuses[0].State, done.Status.ContainerStatuses[0].State)
	}

	// 6. Graceful deletion: SIGTERM, gone; SIGKILL after the grace period.
	// A terminating pod stays Ready while it runs (its readiness probes
	// pass), so its endpoint is serving and terminating, not ready: proxies
	// send it nothing new unless no other endpoint is ready.
	eventually(t, "stubborn's endpoint ready", func() (bool, string) {
		eps, _ := endpointsOf(t, ab.c, "default", "stubborn")
		for _, ep := range eps {
			return ptr.Deref(ep.Conditions.Ready, false), fmt.Sprintf("%+v", ep.Conditions)
		}
		return false, "no endpoint"
	})
	t0 := time.Now()
	for _, name := range []string{"graceful", "stubborn", "squeezed"} {
		if err := ab.c.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ab.waitPod("stubborn", time.Second, "terminating, and Ready while it runs", func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil && podReady(p)
	})
	eventually(t, "stubborn's endpoint serving and terminating", func() (bool, string) {
		eps, _ := endpointsOf(t, ab.c, "default", "stubborn")
		for _, ep := range eps {
			c := ep.Conditions
			return !ptr.Deref(c.Ready, true) && ptr.Deref(c.Serving, false) && ptr.Deref(c.Terminating, false), fmt.Sprintf("%+v", c)
		}
		return false, "no endpoint"
	})
	gone := func(name string) func() bool {
		return func() bool {
			_, err := ab.c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	waitFor(t, 10*time.Second, gone("graceful"))
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("graceful pod took %v to go, want it gone soon after SIGTERM", d)
	}
	waitFor(t, 15*time.Second, gone("stubborn"))
	if d := time.Since(t0); d < 5*time.Second {
		t.Errorf("stubborn pod went after %v, want the 5s grace period first", d)
	}
	waitFor(t, 10*time.Second, gone("squeezed"))
	if got, _ := os.ReadFile(cleanExit); string(got) != "clean\n" {
		t.Errorf("squeezed pod: its SIGTERM handler wrote %q, want \"clean\": after a preStop hook that used the grace period, SIGKILL must wait 2 s", got)
	}
	if l, err := ab.c.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node1", metav1.GetOptions{}); err != nil ||
		!l.Spec.RenewTime.After(firstRenew) {
		t.Errorf("node1's Lease: not renewed since %v in %v (err %v)", firstRenew, time.Since(start), err)
	}

	// The agent stopped (SIGTERM) while a pod terminates leaves its
	// process to the next agent: no SIGKILL before the grace period.
	if err := ab.c.CoreV1().Pods("default").Delete(ctx, "patient", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		data, _ := os.ReadFile(ab.log.Name())
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"Stopping pod"`) && strings.Contains(line, `pod="default/patient"`) {
				return true
			}
		}
		return false
	})
	ab.agent.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- ab.agent.Wait() }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the agent did not stop within 15 s of SIGTERM")
	}
	beat := func() string { data, _ := os.ReadFile(heartbeat); return string(data) }
	was := beat()
	time.Sleep(time.Second)
	if now := beat(); now == was {
		t.Error("patient pod: its process stopped with the agent, before its grace period (want it left running for the next agent)")
	}
	t.Logf("agent test done in %v", time.Since(start))
}

// fetchLogs reads a container's log through the agent's HTTPS endpoint as
// the API server does, with a client certificate for its user; the
// administrator's certificate, from the same CA, is refused.
func (ab *agentBed) fetchLogs(t *testing.T, pod, container, query string) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "apiserver.kubeconfig")
	if out, err := exec.Command(framework.Binary(t), "kubeconfig", "--data-dir", ab.server.DataDir,
		"--user", "system:kube-apiserver", "-o", kc).CombinedOutput(); err != nil {
		t.Fatalf("kubeconfig: %v: %s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", ab.server.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if adminCert, err := tls.X509KeyPair(admin.TLSClientConfig.CertData, admin.TLSClientConfig.KeyData); err == nil {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ab.node.DialContext,
			TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{adminCert}, InsecureSkipVerify: true}}}
		resp, err := c.Get(fmt.Sprintf("https://%s:10250/containerLogs/default/%s/%s", agentNodeIP, pod, container))
		got := 0
		if err == nil {
			got = resp.StatusCode
			resp.Body.Close()
		}
		if got != http.StatusForbidden {
			t.Errorf("log endpoint with the admin certificate: got status %d (err %v), want 403", got, err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cfg.TLSClientConfig.CAData)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ab.node.DialContext,
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}}
	var body []byte
	waitFor(t, 10*time.Second, func() bool {
		resp, err := client.Get(fmt.Sprintf("https://%s:10250/containerLogs/default/%s/%s?%s", agentNodeIP, pod, container, query))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == 200
	})
	// Without a client certificate the endpoint refuses.
	anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ab.node.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := anon.Get(fmt.Sprintf("https://%s:10250/containerLogs/default/%s/%s", agentNodeIP, pod, container)); err == nil {
		resp.Body.Close()
		t.Errorf("log endpoint without a client certificate: got status %d, want the TLS handshake refused", resp.StatusCode)
	}
	return string(body)
}
