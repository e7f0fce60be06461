package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/agent/cgroup"
)

// withLimits sets the pod's only container's resources.limits.
func withLimits(p *corev1.Pod, cpu, memory string) *corev1.Pod {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	p.Spec.Containers[0].Resources.Limits = l
	return p
}

// testMemoryCgroup is the memory cgroup directory the test (and so the
// agent it starts) runs in: the agent makes its pods' memory cgroups
// under it (portal/node1/pod<uid>/<container>).
func testMemoryCgroup(t *testing.T) string {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(self), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == "memory" {
			return filepath.Join("/sys/fs/cgroup/memory", parts[2])
		}
	}
	t.Skip("no cgroup v1 memory hierarchy on this machine")
	return ""
}

// topRows runs kubectl top with args and returns its rows by first
// column (the remaining columns) and its output.
func (ab *agentBed) topRows(args ...string) (map[string][]string, string) {
	out, errOut, code := ab.kubectlRun("", append([]string{"top"}, args...)...)
	rows := map[string][]string{}
	if code != 0 {
		return rows, errOut
	}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 2 {
			continue // the header
		}
		rows[f[0]] = f[1:]
	}
	return rows, out
}

// busyCPU returns a reader of the busy pod's CPU time in nanoseconds,
// from its container's cgroup as the test sees it.
func (ab *agentBed) busyCPU(t *testing.T) func() uint64 {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cgroup.Detect("/sys/fs/cgroup", string(self), "node1")
	if err != nil {
		t.Fatal(err)
	}
	uid := string(ab.get("busy").UID)
	return func() uint64 {
		s, err := m.ContainerStats(uid, "main")
		if err != nil {
			t.Fatalf("busy's cgroup: %v", err)
		}
		return s.CPUNanos
	}
}

// removeCgroupsAtEnd removes the named pods' cgroups when the test ends,
// once their processes are killed: no agent is left to do it.
func (ab *agentBed) removeCgroupsAtEnd(pods []string) {
	t := ab.t
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cgroup.Detect("/sys/fs/cgroup", string(self), "node1")
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, name := range pods {
		if p := ab.get(name); p != nil {
			uids = append(uids, string(p.UID))
		}
	}
	t.Cleanup(func() {
		// The agent first, or it would restart what is killed.
		ab.killAgent()
		ab.killPods()
		for _, uid := range uids {
			// Killed processes take a moment to leave their cgroups.
			for deadline := time.Now().Add(10 * time.Second); m.RemovePod(uid) != nil && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			if err := m.RemovePod(uid); err != nil {
				t.Errorf("cgroups of pod %s left behind: %v", uid, err)
			}
		}
		if err := m.RemoveParent(); err != nil {
			t.Error(err)
		}
	})
}

// milliCores parses kubectl top's CPU column ("987m", "1").
func milliCores(t *testing.T, s string) int64 {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatalf("CPU column %q: %v", s, err)
	}
	return q.MilliValue()
}

// TestTop is issue 20's kubectl top: per-pod cgroups, resources.limits
// enforced through them, OOMKilled reported as kubelet does, the agent's
// /metrics/resource and the metrics.k8s.io API under an unmodified
// kubectl top.
func TestTop(t *testing.T) {
	ab := newAgentBed(t)
	memRoot := testMemoryCgroup(t)
	// The agent runs under `ip netns exec`, whose fresh sysfs hides the
	// node's cgroup mounts: it reaches them through the test's root.
	ab.agentArgs = []string{"--cgroup-root", fmt.Sprintf("/proc/%d/root/sys/fs/cgroup", os.Getpid())}
	ab.restartAgent()

	ab.create(sh("busy", "while :; do :; done"))
	ab.create(sh("idle", "exec sleep 3600"))
	ab.create(withLimits(sh("capped", "while :; do :; done"), "200m", ""))
	// Each round doubles the string: past 20Mi within a few rounds.
	grow := "x=0123456789abcdef; while :; do x=$x$x; done"
	oomAlways := withLimits(sh("oom-always", grow), "", "20Mi")
	ab.create(oomAlways)
	oomNever := withLimits(sh("oom-never", grow), "", "20Mi")
	oomNever.Spec.RestartPolicy = corev1.RestartPolicyNever
	ab.create(oomNever)
	for _, name := range []string{"busy", "idle", "capped"} {
		ab.waitPod(name, 60*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}
	ab.removeCgroupsAtEnd([]string{"busy", "idle", "capped", "oom-always", "oom-never"})

	t.Run("memory limit in the container's cgroup", func(t *testing.T) {
		p := ab.get("oom-always")
		f := filepath.Join(memRoot, cgroup.ParentName("node1"), cgroup.PodName(string(p.UID)), "main", "memory.limit_in_bytes")
		data, err := os.ReadFile(f)
		if got := strings.TrimSpace(string(data)); err != nil || got != "20971520" {
			t.Errorf("%s: got %q (%v), want 20971520", f, got, err)
		}
	})

	t.Run("OOMKilled and restarted with restartPolicy Always", func(t *testing.T) {
		p := ab.waitPod("oom-always", 90*time.Second, "restarted after an OOM kill", func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			return cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil
		})
		last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last.Reason != "OOMKilled" || last.ExitCode != 137 {
			t.Errorf("lastState.terminated: got reason %q exit %d, want OOMKilled 137", last.Reason, last.ExitCode)
		}
		out, _, _ := ab.kubectlRun("", "get", "pod", "oom-always", "-o", "jsonpath={.status.containerStatuses[0].lastState.terminated.reason}")
		if out != "OOMKilled" {
			t.Errorf("kubectl get pod: lastState reason %q, want OOMKilled", out)
		}
	})

	t.Run("OOMKilled and left with restartPolicy Never", func(t *testing.T) {
		p := ab.waitPod("oom-never", 60*time.Second, "terminated", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil
		})
		cs := p.Status.ContainerStatuses[0]
		if term := cs.State.Terminated; term.Reason != "OOMKilled" || term.ExitCode != 137 || cs.RestartCount != 0 {
			t.Errorf("got reason %q exit %d restarts %d, want OOMKilled 137 0", term.Reason, term.ExitCode, cs.RestartCount)
		}
		if p.Status.Phase != corev1.PodFailed {
			t.Errorf("phase: got %s, want Failed", p.Status.Phase)
		}
	})

	t.Run("the agent's resource metrics through nodes/proxy", func(t *testing.T) {
		out, errOut, code := ab.kubectlRun("", "get", "--raw", "/api/v1/nodes/node1/proxy/metrics/resource")
		for _, want := range []string{
			`container_cpu_usage_seconds_total{container="main",namespace="default",pod="busy"}`,
			`container_memory_working_set_bytes{container="main",namespace="default",pod="idle"}`,
			`pod_cpu_usage_seconds_total{namespace="default",pod="busy"}`,
			"node_cpu_usage_seconds_total ", "node_memory_working_set_bytes ",
		} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("metrics lack %s (exit %d, stderr %q):\n%s", want, code, errOut, out)
			}
		}
	})

	t.Run("kubectl top pod", func(t *testing.T) {
		// What the kernel gives the busy pod over the same stretch: on a
		// quiet machine about a core, on a loaded one what is left.
		busyCPU := ab.busyCPU(t)
		t1 := time.Now()
		cpu1 := busyCPU()
		var rows map[string][]string
		var out string
		eventuallyWithin(t, 90*time.Second, "busy, idle and capped in kubectl top pod over a 15 s stretch", func() (bool, string) {
			rows, out = ab.topRows("pod")
			present := len(rows["busy"]) == 2 && len(rows["idle"]) == 2 && len(rows["capped"]) == 2
			return present && time.Since(t1) >= 15*time.Second, out
		})
		kernel := int64(float64(busyCPU()-cpu1) / float64(time.Since(t1).Nanoseconds()) * 1000)
		busy, idle, capped := milliCores(t, rows["busy"][0]), milliCores(t, rows["idle"][0]), milliCores(t, rows["capped"][0])
		t.Logf("busy %dm (its cgroup counted %dm over the stretch), idle %dm, capped at 200m %dm", busy, kernel, idle, capped)
		if kernel >= 800 && busy <= 500 {
			t.Errorf("busy: got %dm while the kernel gave it a core (%dm), want > 500m:\n%s", busy, kernel, out)
		}
		if diff := busy - kernel; diff > kernel/2+50 || -diff > kernel/2+50 {
			t.Errorf("busy: got %dm, want about the %dm its cgroup counted:\n%s", busy, kernel, out)
		}
		if idle >= 100 || busy < 5*idle+50 {
			t.Errorf("idle: got %dm (busy %dm), want near zero (< 100m) and far below busy:\n%s", idle, busy, out)
		}
		if capped > 300 {
			t.Errorf("capped at 200m: got %dm:\n%s", capped, out)
		}
		if _, out := ab.topRows("pod", "-A", "--containers"); !regexp.MustCompile(`(?m)^default\s+busy\s+main\s+\d+m?\s`).MatchString(out) {
			t.Errorf("kubectl top pod -A --containers lacks busy's main:\n%s", out)
		}
		if rows, out := ab.topRows("pod", "-l", "app=idle"); len(rows) != 1 || rows["idle"] == nil {
			t.Errorf("kubectl top pod -l app=idle: got\n%s", out)
		}
	})

	t.Run("kubectl exec runs in the container's cgroup", func(t *testing.T) {
		p := ab.get("idle")
		out, errOut, code := ab.kubectlRun("", "exec", "idle", "--", "cat", "/proc/self/cgroup")
		want := "/" + cgroup.ParentName("node1") + "/" + cgroup.PodName(string(p.UID)) + "/main"
		if code != 0 || !strings.Contains(out, "memory:") || !strings.Contains(out, want) {
			t.Errorf("got exit %d, stderr %q, cgroups:\n%s\nwant memory in %s", code, errOut, out, want)
		}
	})

	t.Run("RBAC: view may top, a user bound nothing may not", func(t *testing.T) {
		if _, errOut, code := ab.kubectlRun("", "create", "rolebinding", "top-viewer", "--clusterrole=view", "--user", "top-viewer"); code != 0 {
			t.Fatalf("binding: exit %d: %s", code, errOut)
		}
		viewer := ab.server.UserKubeconfig(t, "top-viewer", ab.server.URL())
		nobody := ab.server.UserKubeconfig(t, "top-nobody", ab.server.URL())
		eventuallyWithin(t, 30*time.Second, "view to allow kubectl top pod", func() (bool, string) {
			out, errOut, code := ab.kubectlRun("", "--kubeconfig", viewer, "top", "pod", "idle")
			return code == 0 && strings.Contains(out, "idle"), out + errOut
		})
		_, errOut, code := ab.kubectlRun("", "--kubeconfig", nobody, "top", "pod")
		want := `User "top-nobody" cannot list resource "pods" in API group "metrics.k8s.io" in the namespace "default"`
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("got exit %d, stderr %q; want a 403 with %q", code, errOut, want)
		}
	})

	t.Run("kubectl top node", func(t *testing.T) {
		var rows map[string][]string
		var out string
		eventuallyWithin(t, 60*time.Second, "both nodes in kubectl top node", func() (bool, string) {
			rows, out = ab.topRows("node")
			return len(rows["node1"]) >= 4 && len(rows["node2"]) >= 4, out
		})
		if got := milliCores(t, rows["node1"][0]); got < 500 {
			t.Errorf("node1 runs a busy pod: got %dm:\n%s", got, out)
		}
	})

	t.Run("a restarted agent keeps measuring its pods", func(t *testing.T) {
		ab.restartAgent()
		out, _, _ := ab.kubectlRun("", "get", "--raw", "/api/v1/nodes/node1/proxy/metrics/resource")
		if !strings.Contains(out, `pod="busy"`) {
			t.Errorf("after the restart the metrics lack busy:\n%s", out)
		}
	})

	t.Run("a deleted pod's cgroups go", func(t *testing.T) {
		p := ab.get("busy")
		dir := filepath.Join(memRoot, cgroup.ParentName("node1"), cgroup.PodName(string(p.UID)))
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("busy's cgroup %s: %v", dir, err)
		}
		zero := int64(0)
		if err := ab.c.CoreV1().Pods("default").Delete(context.Background(), "busy", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		eventuallyWithin(t, 30*time.Second, "busy's cgroup removed", func() (bool, string) {
			_, err := os.Stat(dir)
			return os.IsNotExist(err), strconv.Quote(dir) + " still there"
		})
	})
}
