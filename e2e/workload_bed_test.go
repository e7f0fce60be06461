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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// workloadBed is one node namespace running `portal server` with its
// in-process agent, so workload pods run as real processes. The node's
// default route points at a second, empty namespace: a connect to a
// ClusterIP needs a route before the proxy's hook rewrites it. That
// namespace (router, 10.100.1.2) is outside the node: a client there
// reaches the node at 10.100.1.1 as a machine on its network would.
//
// With separateControllers the server runs no controllers and a
// `portal controller-manager` runs beside it in the node, so a test can
// kill it.
type workloadBed struct {
	t      *testing.T
	node   *testbed.NS
	router *testbed.NS
	server *framework.Server
	c      kubernetes.Interface
	kc     string // the controller-manager's kubeconfig
	logs   string
	cm     *exec.Cmd
}

func newWorkloadBed(t *testing.T, separateControllers bool, disable ...string) *workloadBed {
	for _, tool := range []string{"python3", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on the node (./hack/deps.sh installs it)", tool)
		}
	}
	b := testbed.New(t)
	wb := &workloadBed{t: t, node: b.Namespace("n1"), logs: t.TempDir()}
	wb.router = b.Namespace("rt")
	b.Link(wb.node, "10.100.1.1/24", wb.router, "10.100.1.2/24")
	wb.node.MustRun("ip", "route", "add", "default", "via", "10.100.1.2")
	args := []string{"--bind-address", "0.0.0.0", "--advertise-address", "10.100.1.1",
		"--hostname-override", "node1", "--node-ip", "10.100.1.1", "--node-monitor-grace-period", "1h"}
	if separateControllers {
		// The node's pod CIDR is given, not left to node IPAM: the server
		// is ready only once its agent is, before any controller runs.
		disable = append(disable, "controllers")
		args = append(args, "--pod-cidr", "10.244.1.0/24")
	}
	if len(disable) > 0 {
		args = append(args, "--disable", strings.Join(disable, ","))
	}
	s := &framework.Server{Command: "server", DataDir: t.TempDir(), Port: 6443, Args: args,
		Wrap: []string{"ip", "netns", "exec", wb.node.Name},
		Dial: wb.node.DialContext,
	}
	framework.Attach(t, s)
	t.Cleanup(func() { agent.KillPods(filepath.Join(s.DataDir, "agent")) })
	s.Start()
	wb.server, wb.c = s, s.Client()
	if separateControllers {
		wb.kc = s.UserKubeconfig(t, "system:kube-controller-manager", "https://127.0.0.1:6443")
		wb.startControllerManager()
		t.Cleanup(func() {
			if t.Failed() {
				data, _ := os.ReadFile(filepath.Join(wb.logs, "controller-manager.log"))
				lines := strings.Split(string(data), "\n")
				t.Logf("last lines of the controller-manager log:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		})
	}
	wb.waitNodeReady()
	return wb
}

// startControllerManager runs `portal controller-manager` in the node. It
// keeps the same identity across restarts, so a restarted one takes its
// Lease back at once instead of waiting for it to expire.
func (wb *workloadBed) startControllerManager() {
	wb.t.Helper()
	log, err := os.OpenFile(filepath.Join(wb.logs, "controller-manager.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		wb.t.Fatal(err)
	}
	wb.cm = wb.node.Start(log, framework.Binary(wb.t), "controller-manager", "--kubeconfig", wb.kc,
		"--identity", "cm-1", "--node-monitor-grace-period", "1h", "--metrics-bind-address", "127.0.0.1:0")
}

// killControllerManager ends the controller-manager with SIGKILL, as a
// crash or an OOM kill would.
func (wb *workloadBed) killControllerManager() {
	wb.cm.Process.Kill()
	wb.cm.Wait()
}

func (wb *workloadBed) waitNodeReady() {
	wb.t.Helper()
	eventuallyWithin(wb.t, 60*time.Second, "node1 Ready with a pod CIDR", func() (bool, string) {
		n, err := wb.c.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && n.Spec.PodCIDR != "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %v, podCIDR %q", n.Status.Conditions, n.Spec.PodCIDR)
	})
}

// rollout is what a test checks of a Deployment's state.
type rollout struct {
	deploy *appsv1.Deployment
	sets   []appsv1.ReplicaSet // owned by the Deployment
	pods   []corev1.Pod        // matching its selector
}

func getRollout(t *testing.T, c kubernetes.Interface, ns, name string) (rollout, error) {
	t.Helper()
	ctx := context.Background()
	var r rollout
	d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	r.deploy = d
	sel := metav1.FormatLabelSelector(d.Spec.Selector)
	sets, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return r, err
	}
	for _, rs := range sets.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
			r.sets = append(r.sets, rs)
		}
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return r, err
	}
	r.pods = pods.Items
	return r, nil
}

// current is the ReplicaSet of the Deployment's revision (the
// deployment.kubernetes.io/revision annotation both carry, as
// `kubectl rollout` finds it); nil when there is none yet.
func (r rollout) current() *appsv1.ReplicaSet {
	rev := r.deploy.Annotations[revisionAnnotation]
	for i, rs := range r.sets {
		if rev != "" && rs.Annotations[revisionAnnotation] == rev {
			return &r.sets[i]
		}
	}
	return nil
}

const revisionAnnotation = "deployment.kubernetes.io/revision"

// live are the pods that count against maxSurge: neither terminating nor
// finished.
func live(pods []corev1.Pod) []corev1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
}

// complete says whether the rollout is done as `kubectl rollout status`
// decides it, and why not.
func (r rollout) complete() (bool, string) {
	d := r.deploy
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	ok := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
	return ok, fmt.Sprintf("generation %d observed %d; replicas %d updated %d available %d, want %d; %d ReplicaSets, %d pods",
		d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, want, len(r.sets), len(r.pods))
}

// waitComplete waits until the Deployment's rollout is complete and every
// live pod is of its current ReplicaSet, and returns the state.
func waitComplete(t *testing.T, c kubernetes.Interface, ns, name string, timeout time.Duration) rollout {
	t.Helper()
	var r rollout
	eventuallyWithin(t, timeout, "deployment "+name+" rolled out", func() (bool, string) {
		var err error
		if r, err = getRollout(t, c, ns, name); err != nil {
			return false, err.Error()
		}
		ok, why := r.complete()
		cur := r.current()
		if !ok || cur == nil {
			return false, why
		}
		hash := cur.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		for _, p := range live(r.pods) {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
				return false, fmt.Sprintf("pod %s of template %s still live, want only %s", p.Name, p.Labels[appsv1.DefaultDeploymentUniqueLabelKey], hash)
			}
		}
		return len(live(r.pods)) == int(ptr.Deref(r.deploy.Spec.Replicas, 1)), fmt.Sprintf("%d live pods", len(live(r.pods)))
	})
	return r
}

// kubectlFor runs kubectl against s as Server.Kubectl does, with a
// deadline of the caller's choosing for the commands that wait (rollout
// status), and returns the output and kubectl's error (its exit status).
func kubectlFor(t *testing.T, s *framework.Server, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := slices.Clone(s.Wrap)
	if path, err := exec.LookPath("kubectl"); err == nil {
		argv = append(append(argv, path), args...)
	} else {
		argv = append(append(argv, framework.Binary(t), "kubectl"), args...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig())
	out, err := cmd.CombinedOutput()
	return string(out), err
}
