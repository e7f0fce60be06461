package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// The DaemonSet bed: node1 runs `portal server` (API and controllers) and
// an agent; node2 and, later, node3 run agents, each joined to node1 by
// its own link and reaching the API through a forwarder to node1's
// loopback. Pod ranges (10.245.N.0/24) are apart from the links' addresses.
type dsBed struct {
	t       *testing.T
	bed     *testbed.Bed
	node1   *testbed.NS
	server  *framework.Server
	c       kubernetes.Interface
	rootDir string
}

func newDSBed(t *testing.T) *dsBed {
	b := &dsBed{t: t, bed: testbed.New(t), rootDir: t.TempDir()}
	// Registered after the bed's cleanup, so it runs first: pod processes
	// live in their own namespaces, out of the bed's reach.
	t.Cleanup(func() {
		roots, _ := filepath.Glob(filepath.Join(b.rootDir, "node*"))
		for _, root := range roots {
			agent.KillPods(root)
		}
	})
	b.node1 = b.bed.Namespace("node1")
	// node1's own address, 10.100.1.1, on a link to a gateway namespace,
	// with the default route the server needs to advertise it.
	b.bed.Link(b.node1, "10.100.1.1/24", b.bed.Namespace("gw"), "10.100.1.254/24")
	b.node1.MustRun("ip", "route", "add", "default", "via", "10.100.1.254")
	b.server = startAPIServer(t, b.node1)
	b.c = b.server.Client()
	return b
}

// addNode starts node N's agent: node1 in the server's namespace; any
// other in a new namespace linked to node1 on 10.100.N.0/24.
func (b *dsBed) addNode(n int) {
	b.t.Helper()
	name := fmt.Sprintf("node%d", n)
	ns := b.node1
	ip := "10.100.1.1"
	if n > 1 {
		ns = b.bed.Namespace(name)
		ip = fmt.Sprintf("10.100.%d.2", n)
		b.bed.Link(b.node1, fmt.Sprintf("10.100.%d.1/24", n), ns, ip+"/24")
		ns.MustRun("ip", "route", "add", "default", "via", fmt.Sprintf("10.100.%d.1", n))
		forwardAPI(b.t, b.server, b.node1, ns)
	}
	log, err := os.Create(filepath.Join(b.rootDir, name+".log"))
	if err != nil {
		b.t.Fatal(err)
	}
	logAgentOnFailure(b.t, name+"'s agent log", log.Name(), 40)
	kc := b.server.UserKubeconfig(b.t, "system:node:"+name, b.server.URL())
	ns.Start(log, framework.Binary(b.t), "agent", "--kubeconfig", kc,
		"--hostname-override", name, "--node-ip", ip, "--pod-cidr", fmt.Sprintf("10.245.%d.0/24", n),
		"--root-dir", filepath.Join(b.rootDir, name), "-v=2")
}

// daemonPods returns "node:name" for each live, Ready pod of the
// DaemonSet selected by app=name, sorted, and every live pod's node and
// phase for a failure message.
func (b *dsBed) daemonPods(app string) (ready []string, all string) {
	pods, err := b.c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err.Error()
	}
	var desc []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		desc = append(desc, fmt.Sprintf("%s on %q %s ready=%v", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p)))
		if podReady(&p) {
			ready = append(ready, p.Spec.NodeName+":"+p.Name)
		}
	}
	slices.Sort(ready)
	return ready, strings.Join(desc, "; ")
}

// onEachNode waits until app runs exactly one Ready pod on each of nodes
// and no other live pod, and its status says so; it returns the pods.
func (b *dsBed) onEachNode(app string, nodes ...string) []string {
	b.t.Helper()
	var pods []string
	eventuallyWithin(b.t, time.Minute, fmt.Sprintf("daemonset %s: one ready pod on each of %v", app, nodes), func() (bool, string) {
		ready, all := b.daemonPods(app)
		pods = ready
		var got []string
		for _, r := range ready {
			got = append(got, strings.SplitN(r, ":", 2)[0])
		}
		ds, err := b.c.AppsV1().DaemonSets("default").Get(context.Background(), app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := ds.Status
		n := int32(len(nodes))
		ok := slices.Equal(got, nodes) && strings.Count(all, " on ") == len(nodes) &&
			st.DesiredNumberScheduled == n && st.NumberReady == n && st.NumberMisscheduled == 0 && st.ObservedGeneration == ds.Generation
		return ok, fmt.Sprintf("pods: %s; status desired %d ready %d misscheduled %d", all, st.DesiredNumberScheduled, st.NumberReady, st.NumberMisscheduled)
	})
	return pods
}

const daemonManifest = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: %[1]s
spec:
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: debian
        command: ["sleep", "3600"]
%[2]s`

// TestDaemonSet: on a two-node bed a DaemonSet runs exactly one pod on
// each node; a third node joining gets one; a rolling update and its undo
// replace every pod and `kubectl rollout` follows them; a node tainted
// NoExecute loses its pod, and a DaemonSet tolerating the taint runs there.
func TestDaemonSet(t *testing.T) {
	b := newDSBed(t)
	b.addNode(1)
	b.addNode(2)
	eventuallyWithin(t, time.Minute, "two Ready nodes", func() (bool, string) {
		nodes, err := b.c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, node := range nodes.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					n++
				}
			}
		}
		return n == 2, fmt.Sprintf("%d ready", n)
	})

	b.server.MustKubectlStdin(fmt.Sprintf(daemonManifest, "daemon", ""), "apply", "-f", "-")
	before := b.onEachNode("daemon", "node1", "node2")

	b.addNode(3)
	after := b.onEachNode("daemon", "node1", "node2", "node3")
	for _, p := range before {
		if !slices.Contains(after, p) {
			t.Errorf("pod %s: replaced when node3 joined; want it kept (pods now %v)", p, after)
		}
	}
	if out := b.server.MustKubectl("get", "ds", "daemon"); !strings.Contains(out, "daemon") {
		t.Errorf("kubectl get ds: got %q", out)
	}

	b.rollout(after)

	b.server.MustKubectl("taint", "nodes", "node3", "dedicated=db:NoExecute")
	b.onEachNode("daemon", "node1", "node2")

	tolerant := `      tolerations:
      - {key: dedicated, operator: Exists}
`
	b.server.MustKubectlStdin(fmt.Sprintf(daemonManifest, "tolerant", tolerant), "apply", "-f", "-")
	b.onEachNode("tolerant", "node1", "node2", "node3")

	ds, err := b.c.AppsV1().DaemonSets("default").Get(context.Background(), "daemon", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		t.Errorf("default update strategy: got %q, want RollingUpdate", ds.Spec.UpdateStrategy.Type)
	}
}

// rollout changes the DaemonSet "daemon" running pods, waits for
// `kubectl rollout status`, checks every pod was replaced and the history
// has both revisions, then undoes it the same way.
func (b *dsBed) rollout(pods []string) {
	b.t.Helper()
	k := b.server.MustKubectl
	nodes := func(pods []string) []string {
		var out []string
		for _, p := range pods {
			out = append(out, strings.SplitN(p, ":", 2)[0])
		}
		return out
	}
	for _, step := range []struct{ what, cmd string }{
		{"set env", "set env ds/daemon STAGE=2"},
		{"undo", "rollout undo ds/daemon"},
	} {
		k(strings.Fields(step.cmd)...)
		if out := k("rollout", "status", "ds/daemon", "--timeout=90s"); !strings.Contains(out, "successfully rolled out") {
			b.t.Fatalf("rollout status after %s: got %q, want successfully rolled out", step.what, out)
		}
		now := b.onEachNode("daemon", nodes(pods)...)
		for _, p := range now {
			if slices.Contains(pods, p) {
				b.t.Errorf("after %s: pod %s not replaced (pods %v)", step.what, p, now)
			}
		}
		pods = now
	}
	out := k("rollout", "history", "ds/daemon")
	// The undo made the first template revision 3; revision 1 is gone.
	if !regexp.MustCompile(`(?m)^2 +`).MatchString(out) || !regexp.MustCompile(`(?m)^3 +`).MatchString(out) ||
		regexp.MustCompile(`(?m)^1 +`).MatchString(out) {
		b.t.Errorf("rollout history: got %q, want revisions 2 and 3 only", out)
	}
	ds, err := b.c.AppsV1().DaemonSets("default").Get(context.Background(), "daemon", metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	if env := ds.Spec.Template.Spec.Containers[0].Env; len(env) != 0 {
		b.t.Errorf("template after undo: got env %v, want none", env)
	}
}
