package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// TestSeedsScenario is the seeds' story on two nodes with real processes:
// node1 runs `portal server` with everything (API, controllers, DNS, proxy,
// agent), node2 runs `portal proxy` and `portal agent` against it. Three
// web pods (python3 -m http.server) across both nodes sit behind
// my-service; a frontend pod reaches them by short name, by full name and
// by the environment variables kubelet would give it.
func TestSeedsScenario(t *testing.T) {
	for _, tool := range []string{"python3", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on the node (./hack/deps.sh installs it)", tool)
		}
	}
	b := testbed.New(t)
	node1, node2 := b.Namespace("n1"), b.Namespace("n2")
	b.Link(node1, "10.100.1.1/24", node2, "10.100.1.2/24")
	// Each node has a default route (a connect to a ClusterIP needs one
	// before any hook rewrites it); here each is the other's router.
	node1.MustRun("ip", "route", "add", "default", "via", "10.100.1.2")
	node2.MustRun("ip", "route", "add", "default", "via", "10.100.1.1")

	s := &framework.Server{Command: "server", DataDir: t.TempDir(), Port: 6443,
		Args: []string{"--bind-address", "0.0.0.0", "--advertise-address", "10.100.1.1",
			"--hostname-override", "node1", "--node-ip", "10.100.1.1", "--node-monitor-grace-period", "1h"},
		Wrap: []string{"ip", "netns", "exec", node1.Name},
		Dial: node1.DialContext,
	}
	framework.Attach(t, s)
	t.Cleanup(func() { agent.KillPods(filepath.Join(s.DataDir, "agent")) })
	s.Start()
	c := s.Client()

	// Each component of node2 authenticates as itself, as on a real node.
	kc := s.UserKubeconfig(t, "system:node:node2", "https://10.100.1.1:6443")
	proxyKC := s.UserKubeconfig(t, "system:kube-proxy", "https://10.100.1.1:6443")
	logs := t.TempDir()
	root2 := filepath.Join(t.TempDir(), "agent2")
	t.Cleanup(func() { agent.KillPods(root2) })
	proxyLog, _ := os.Create(filepath.Join(logs, "proxy2.log"))
	node2.Start(proxyLog, framework.Binary(t), "proxy", "--kubeconfig", proxyKC, "--hostname-override", "node2",
		"--cluster-cidr", "10.244.0.0/16")
	startAgent2 := func() *exec.Cmd {
		f, _ := os.OpenFile(filepath.Join(logs, "agent2.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		return node2.Start(f, framework.Binary(t), "agent", "--kubeconfig", kc, "--hostname-override", "node2",
			"--node-ip", "10.100.1.2", "--cluster-cidr", "10.244.0.0/16", "--root-dir", root2)
	}
	// As on a node that never loaded br_netfilter: the frontend reaches
	// web-2 on its own node only if the agent turns bridged traffic
	// through netfilter (else web-2's replies keep their DNAT).
	node2.MustRun("sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0")
	agent2 := startAgent2()
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"proxy2.log", "agent2.log"} {
				data, _ := os.ReadFile(filepath.Join(logs, f))
				lines := strings.Split(string(data), "\n")
				t.Logf("last lines of %s:\n%s", f, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})

	ctx := context.Background()
	pods := c.CoreV1().Pods("default")
	www := t.TempDir()
	for i, node := range []string{"node1", "node1", "node2"} {
		name := fmt.Sprintf("web-%d", i)
		dir := filepath.Join(www, name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "index.html"), []byte(name), 0o644)
		os.WriteFile(filepath.Join(dir, "ready"), []byte("ok"), 0o644)
		if _, err := pods.Create(ctx, webPod(name, node, dir), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "my-service"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	svc, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "three ready endpoints", func() (bool, string) {
		eps, _ := endpointsOf(t, c, "default", "my-service")
		ready := 0
		for _, ep := range eps {
			if ptr.Deref(ep.Conditions.Ready, false) {
				ready++
			}
		}
		return ready == 3, fmt.Sprint(len(eps), " endpoints, ", ready, " ready")
	})

	frontend := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "frontend"}, Spec: corev1.PodSpec{
		NodeName:   "node2",
		Containers: []corev1.Container{{Name: "main", Image: "curl", Command: []string{"sh", "-c", frontendScript}}}}}
	if _, err := pods.Create(ctx, frontend, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out string
	eventually(t, "frontend has asked all three ways", func() (bool, string) {
		out, _ = s.Kubectl("logs", "frontend")
		return strings.Count(out, "GET ") == 3 && strings.Contains(out, "LOOP"), out
	})

	t.Run("reach by name, full name and environment", func(t *testing.T) {
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "GET ") {
				continue
			}
			t.Log(line)
			if !strings.Contains(line, "-> web-") {
				t.Errorf("frontend request failed: %s", line)
			}
		}
	})

	t.Run("environment equals kubelet's", func(t *testing.T) {
		got := map[string]string{}
		for _, line := range strings.Split(between(out, "ENV-BEGIN\n", "ENV-END"), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && (strings.HasPrefix(k, "KUBERNETES_") || strings.HasPrefix(k, "MY_SERVICE_")) {
				got[k] = v
			}
		}
		want := kubeletServiceEnv("kubernetes", "10.96.0.1", "https", 443)
		for k, v := range kubeletServiceEnv("my-service", svc.Spec.ClusterIP, "http", 80) {
			want[k] = v
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: got %q, want %q", k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected variable %s=%s", k, got[k])
			}
		}
	})

	t.Run("requests spread over the three backends on both nodes", func(t *testing.T) {
		eventually(t, "every backend answered the frontend", func() (bool, string) {
			seen := map[string]int{}
			for _, r := range loopResults(s) {
				seen[strings.Fields(r + " ?")[0]]++
			}
			return seen["web-0"] > 0 && seen["web-1"] > 0 && seen["web-2"] > 0, fmt.Sprint(seen)
		})
	})

	t.Run("deleting a backend costs no request", func(t *testing.T) {
		before := loopResults(s)
		if err := pods.Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// While its preStop hook runs, web-0 keeps passing its readiness
		// probe: serving and terminating, not ready.
		eventually(t, "web-0 serving and terminating", func() (bool, string) {
			eps, _ := endpointsOf(t, c, "default", "my-service")
			for _, ep := range eps {
				if ptr.Deref(ep.TargetRef, corev1.ObjectReference{}).Name == "web-0" {
					c := ep.Conditions
					return !ptr.Deref(c.Ready, true) && ptr.Deref(c.Serving, false) && ptr.Deref(c.Terminating, false), fmt.Sprintf("%+v", c)
				}
			}
			return false, "web-0 not in the slices"
		})
		eventually(t, "web-0 gone", func() (bool, string) {
			_, err := pods.Get(ctx, "web-0", metav1.GetOptions{})
			return err != nil, "still there"
		})
		time.Sleep(time.Second)
		after := loopResults(s)
		if len(after) < len(before)+10 {
			t.Fatalf("frontend made %d requests during the deletion, want many", len(after)-len(before))
		}
		if failed := countNot(after[len(before):], "200"); failed > 0 {
			t.Errorf("%d of %d requests failed while a backend was deleted: %v", failed, len(after)-len(before), after[len(before):])
		}
		t.Logf("%d requests while web-0 was deleted, all answered", len(after)-len(before))
	})

	t.Run("failing readiness leaves the endpoints, passing brings it back", func(t *testing.T) {
		os.Remove(filepath.Join(www, "web-2", "ready"))
		eventually(t, "web-2 not ready", func() (bool, string) {
			p, err := pods.Get(ctx, "web-2", metav1.GetOptions{})
			return err == nil && !podReady(p), "still ready"
		})
		eventually(t, "web-2 out of the endpoints", func() (bool, string) {
			eps, _ := endpointsOf(t, c, "default", "my-service")
			for _, ep := range eps {
				if ptr.Deref(ep.TargetRef, corev1.ObjectReference{}).Name == "web-2" && ptr.Deref(ep.Conditions.Ready, false) {
					return false, "web-2 still ready in the slice"
				}
			}
			return true, ""
		})
		os.WriteFile(filepath.Join(www, "web-2", "ready"), []byte("ok"), 0o644)
		eventually(t, "web-2 ready again in the endpoints", func() (bool, string) {
			eps, _ := endpointsOf(t, c, "default", "my-service")
			for _, ep := range eps {
				if ptr.Deref(ep.TargetRef, corev1.ObjectReference{}).Name == "web-2" && ptr.Deref(ep.Conditions.Ready, false) {
					return true, ""
				}
			}
			return false, "web-2 not ready in the slice"
		})
	})

	t.Run("agent restart leaves the pods running", func(t *testing.T) {
		p, _ := pods.Get(ctx, "web-2", metav1.GetOptions{})
		before := loopResults(s)
		agent2.Process.Kill()
		agent2.Wait()
		agent2 = startAgent2()
		time.Sleep(3 * time.Second)
		after, _ := pods.Get(ctx, "web-2", metav1.GetOptions{})
		if after.Status.ContainerStatuses[0].RestartCount != p.Status.ContainerStatuses[0].RestartCount ||
			!after.Status.ContainerStatuses[0].State.Running.StartedAt.Equal(&p.Status.ContainerStatuses[0].State.Running.StartedAt) {
			t.Errorf("web-2 after the agent restart: got %+v, want the same run as %+v", after.Status.ContainerStatuses[0], p.Status.ContainerStatuses[0])
		}
		results := loopResults(s)
		if failed := countNot(results[len(before):], "200"); failed > 0 {
			t.Errorf("%d requests failed across the agent restart", failed)
		}
	})
}

// frontendScript prints its environment, asks my-service three ways, then
// keeps asking, one line per request.
const frontendScript = `echo ENV-BEGIN; env | sort; echo ENV-END
for u in http://my-service/ http://my-service.default.svc.cluster.local/ "http://$MY_SERVICE_SERVICE_HOST:$MY_SERVICE_SERVICE_PORT/"; do
  echo "GET $u -> $(curl -s -m 5 -w ' (curl exit %{exitcode})' "$u")"
done
while true; do echo "LOOP $(curl -s -m 2 -w ' %{http_code}' http://my-service/)"; sleep 0.05; done`

func webPod(name, node, dir string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
		NodeName:                      node,
		TerminationGracePeriodSeconds: ptr.To[int64](10),
		Containers: []corev1.Container{{Name: "web", Image: "python:3", WorkingDir: dir,
			Command: []string{"python3", "-m", "http.server", "8080"},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/ready", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1, FailureThreshold: 1},
			// The usual graceful-shutdown pattern: keep serving while the
			// proxies take the endpoint out of rotation.
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 4}}},
		}}}}
}

// kubeletServiceEnv is what kubelet sets for a Service with one TCP port,
// written out from its documented rules (not from Portal's code).
func kubeletServiceEnv(name, ip, portName string, port int) map[string]string {
	n := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	p := fmt.Sprint(port)
	url := fmt.Sprintf("tcp://%s:%d", ip, port)
	return map[string]string{
		n + "_SERVICE_HOST": ip, n + "_SERVICE_PORT": p, n + "_SERVICE_PORT_" + strings.ToUpper(portName): p,
		n + "_PORT": url, n + "_PORT_" + p + "_TCP": url, n + "_PORT_" + p + "_TCP_PROTO": "tcp",
		n + "_PORT_" + p + "_TCP_PORT": p, n + "_PORT_" + p + "_TCP_ADDR": ip,
	}
}

// loopResults are the frontend's request results so far, read with
// `kubectl logs` (pods/log through the agent).
func loopResults(s *framework.Server) []string {
	out, _ := s.Kubectl("logs", "frontend")
	var res []string
	for _, line := range strings.Split(out, "\n") {
		if r, ok := strings.CutPrefix(line, "LOOP "); ok {
			res = append(res, r) // "<backend> <status>"
		}
	}
	return res
}

// countNot counts the results whose status is not want.
func countNot(xs []string, want string) int {
	return len(slices.DeleteFunc(slices.Clone(xs), func(x string) bool { return strings.HasSuffix(x, " "+want) }))
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	in, _, _ := strings.Cut(rest, to)
	return in
}
