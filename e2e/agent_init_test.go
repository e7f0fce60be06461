package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestAgentInitContainers: init containers run in order, each to success,
// before the app container, in the pod's namespaces and with its log
// files; a failure under restartPolicy Never fails the pod and nothing
// else starts; under OnFailure the init container is run again. A sidecar
// (restartPolicy Always) restarts even under Never, lets the next
// container start once its startup probe passed, counts in READY, stops
// after the app container, and does not keep a finished pod running. An agent restart adopts a running init
// container (and learns how it ended) and does not run finished ones
// again. Regression: the agent skipped init containers and reported the
// pod Initialized.
func TestAgentInitContainers(t *testing.T) {
	ab := newAgentBed(t)
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }

	// setup waits for the gate, so the test sees the pod initializing,
	// then leaves a file that main reads; prepare runs only after setup.
	handoff := sh("handoff", `cat `+file("shared")+`; exec sleep 3600`)
	handoff.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Image: "debian", Command: []string{"sh", "-c",
			`echo setting up in $(hostname); while [ ! -e ` + file("gate") + ` ]; do sleep 0.1; done; echo hi > ` + file("shared")}},
		{Name: "prepare", Image: "debian", Command: []string{"sh", "-c", `echo prepared >> ` + file("shared")}},
	}
	// never's init container fails; with restartPolicy Never the pod fails.
	never := sh("never", `touch `+file("never-app-ran")+`; exec sleep 3600`)
	never.Spec.RestartPolicy = corev1.RestartPolicyNever
	never.Spec.InitContainers = []corev1.Container{{Name: "fail", Image: "debian", Command: []string{"sh", "-c", "echo failing; exit 3"}}}
	// retry's init container fails on its first run and succeeds on the next.
	retry := sh("retry", `exec sleep 3600`)
	retry.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	retry.Spec.InitContainers = []corev1.Container{{Name: "flaky", Image: "debian", Command: []string{"sh", "-c",
		`n=$(cat ` + file("runs") + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + file("runs") + `; [ "$n" != 0 ]`}}}
	// sidecar's proxy is a sidecar: it fails once and restarts although
	// the pod never restarts containers; check runs only once proxy's
	// startup probe passed (else it fails, and with it the pod); main and
	// proxy trace their SIGTERM, main's first.
	sidecar := sh("sidecar", `trap 'echo main >> `+file("trace")+`; exit 0' TERM; while true; do sleep 0.1; done`)
	sidecar.Spec.RestartPolicy = corev1.RestartPolicyNever
	sidecar.Spec.InitContainers = []corev1.Container{
		{Name: "proxy", Image: "debian", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Command: []string{"sh", "-c",
			`n=$(cat ` + file("proxy-runs") + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + file("proxy-runs") + `; [ "$n" != 0 ] || exit 1; ` +
				`trap 'echo proxy >> ` + file("trace") + `; exit 0' TERM; touch ` + file("proxy-up") + `; while true; do sleep 0.1; done`},
			StartupProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 30, SuccessThreshold: 1, TimeoutSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-e", file("proxy-up")}}}}},
		{Name: "check", Image: "debian", Command: []string{"test", "-e", file("proxy-up")}},
	}
	// job's main finishes while its sidecar runs: the pod succeeds and
	// the sidecar is stopped.
	job := sh("job", `echo done`)
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	job.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "debian", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Command: []string{"sh", "-c", `trap 'exit 0' TERM; while true; do sleep 0.1; done`}}}
	for _, p := range []*corev1.Pod{handoff, never, retry, sidecar, job} {
		ab.create(p)
	}

	// Initializing: Pending, setup running, the rest waiting, and
	// `kubectl get` says Init:0/2.
	p := ab.waitPod("handoff", 20*time.Second, "initializing with setup running", func(p *corev1.Pod) bool {
		s := p.Status.InitContainerStatuses
		return len(s) == 2 && s[0].State.Running != nil
	})
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("handoff while initializing: got phase %s, want Pending", p.Status.Phase)
	}
	if got := stateWord(p.Status.InitContainerStatuses[1]); got != "waiting/PodInitializing" {
		t.Errorf("prepare while setup runs: got %s, want waiting/PodInitializing", got)
	}
	if got := stateWord(p.Status.ContainerStatuses[0]); got != "waiting/PodInitializing" {
		t.Errorf("main while initializing: got %s, want waiting/PodInitializing", got)
	}
	if c := podCondition(p, corev1.PodInitialized); c.Status != corev1.ConditionFalse || c.Reason != "ContainersNotInitialized" ||
		c.Message != "containers with incomplete status: [setup prepare]" {
		t.Errorf("Initialized while initializing: got %s %s %q, want False ContainersNotInitialized \"containers with incomplete status: [setup prepare]\"",
			c.Status, c.Reason, c.Message)
	}
	ab.waitKubectlPod("handoff", "0/1", "Init:0/2")
	waitFor(t, 10*time.Second, func() bool {
		out, _ := ab.kubectlCmd("logs", "handoff", "-c", "setup").CombinedOutput()
		return strings.Contains(string(out), "setting up in handoff")
	})

	// restartPolicy Never: the pod fails, main never starts.
	p = ab.waitPod("never", 20*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if s := p.Status.InitContainerStatuses; len(s) != 1 || s[0].State.Terminated == nil || s[0].State.Terminated.ExitCode != 3 {
		t.Errorf("never's init container: got %+v, want terminated with exit code 3", s)
	}
	if got := stateWord(p.Status.ContainerStatuses[0]); got != "waiting/PodInitializing" {
		t.Errorf("never's app container: got %s, want waiting/PodInitializing", got)
	}
	ab.waitKubectlPod("never", "0/1", "Init:Error")

	// OnFailure: the failed init container runs again, then main starts.
	p = ab.waitPod("retry", 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	s := p.Status.InitContainerStatuses
	if len(s) != 1 || s[0].RestartCount != 1 || stateWord(s[0]) != "terminated/Completed" ||
		s[0].LastTerminationState.Terminated == nil || s[0].LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("retry's init container: got %+v, want completed after one restart from exit code 1", s)
	}
	if c := podCondition(p, corev1.PodInitialized); c.Status != corev1.ConditionTrue {
		t.Errorf("retry Initialized: got %s, want True", c.Status)
	}
	ab.waitKubectlPod("retry", "1/1", "Running")

	// The sidecar runs next to main and counts in READY.
	p = ab.waitPod("sidecar", 20*time.Second, "Running and Ready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	if s := p.Status.InitContainerStatuses; len(s) != 2 || s[0].State.Running == nil || s[0].Started == nil || !*s[0].Started || !s[0].Ready ||
		s[0].RestartCount != 1 || stateWord(s[1]) != "terminated/Completed" {
		t.Errorf("sidecar pod's init containers: got %+v, want proxy running, started, ready after 1 restart, and check completed", s)
	}
	ab.waitKubectlPod("sidecar", "2/2", "Running")

	p = ab.waitPod("job", 20*time.Second, "Succeeded with its sidecar stopped", func(p *corev1.Pod) bool {
		s := p.Status.InitContainerStatuses
		return p.Status.Phase == corev1.PodSucceeded && len(s) == 1 && s[0].State.Terminated != nil
	})
	if got := stateWord(p.Status.ContainerStatuses[0]); got != "terminated/Completed" {
		t.Errorf("job's main: got %s, want terminated/Completed", got)
	}
	ab.waitKubectlPod("job", "0/2", "Completed")

	// An agent restart while setup runs: setup is adopted, and once it
	// ends its exit code is known, so it is not run again.
	ab.restartAgent()
	if err := os.WriteFile(file("gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = ab.waitPod("handoff", 20*time.Second, "Running and Ready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	for _, s := range p.Status.InitContainerStatuses {
		if stateWord(s) != "terminated/Completed" || s.RestartCount != 0 || !s.Ready {
			t.Errorf("handoff init container %s: got %s, %d restarts, ready %v; want completed once and ready", s.Name, stateWord(s), s.RestartCount, s.Ready)
		}
	}
	if c := podCondition(p, corev1.PodInitialized); c.Status != corev1.ConditionTrue {
		t.Errorf("handoff Initialized: got %s %q, want True", c.Status, c.Message)
	}
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(ab.logOf(p, "main"), "hi\nprepared\n") })
	ab.waitKubectlPod("handoff", "1/1", "Running")
	if data, _ := os.ReadFile(file("runs")); strings.TrimSpace(string(data)) != "2" {
		t.Errorf("retry's init container runs after the agent restart: got %q, want 2 (a finished one does not run again)", data)
	}
	if _, err := os.Stat(file("never-app-ran")); err == nil {
		t.Error("never's app container ran after its init container failed under restartPolicy Never")
	}

	// Deleted, the sidecar pod stops main first, then proxy.
	if err := ab.c.CoreV1().Pods("default").Delete(context.Background(), "sidecar", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() bool { return ab.get("sidecar") == nil })
	if data, _ := os.ReadFile(file("trace")); string(data) != "main\nproxy\n" {
		t.Errorf("SIGTERM order: got %q, want main, then the sidecar proxy", data)
	}
}

// stateWord is a status's state and reason, e.g. "waiting/PodInitializing".
func stateWord(s corev1.ContainerStatus) string {
	switch {
	case s.State.Running != nil:
		return "running"
	case s.State.Terminated != nil:
		return "terminated/" + s.State.Terminated.Reason
	case s.State.Waiting != nil:
		return "waiting/" + s.State.Waiting.Reason
	}
	return "none"
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

// waitKubectlPod waits until `kubectl get pod` shows the pod's READY and
// STATUS columns as given.
func (ab *agentBed) waitKubectlPod(name, ready, status string) {
	ab.t.Helper()
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, err := ab.kubectlCmd("get", "pod", name, "--no-headers").CombinedOutput()
		got = strings.TrimSpace(string(out))
		if f := strings.Fields(got); err == nil && len(f) >= 3 && f[1] == ready && f[2] == status {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	ab.t.Errorf("kubectl get pod %s: got %q, want READY %s and STATUS %s", name, got, ready, status)
}
