package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
)

// TestAgentLogsAndPreStop: `kubectl logs -f` follows a running container's
// new output, `kubectl logs --previous` shows the run before a restart, and
// a preStop exec hook runs inside the container before SIGTERM.
func TestAgentLogsAndPreStop(t *testing.T) {
	ab := newAgentBed(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	counter := filepath.Join(dir, "runs")
	trace := filepath.Join(dir, "trace")

	// follow prints one line, then one more each time the test creates gate.N.
	follow := sh("follow", `echo first; n=0; while true; do if [ -e `+gate+`.$n ]; then echo after-$n; n=$((n+1)); fi; sleep 0.1; done`)
	// restarter's first run prints run-0 and fails; the next prints run-1 and stays.
	restarter := sh("restarter", `n=$(cat `+counter+` 2>/dev/null || echo 0); echo run-$n; echo $((n+1)) > `+counter+`; [ "$n" != 0 ] || exit 1; exec sleep 3600`)
	// hooked traces the preStop hook (with the pod's host name and the
	// container's environment) and then its own SIGTERM, in order.
	hooked := sh("hooked", `trap 'echo term >> `+trace+`; exit 0' TERM; while true; do sleep 0.1; done`)
	hooked.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
	hooked.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", Value: "from-env"}}
	hooked.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
		Command: []string{"sh", "-c", `echo "prestop $(hostname) $GREETING" >> ` + trace + `; sleep 1`}}}}
	for _, p := range []*corev1.Pod{follow, restarter, hooked} {
		ab.create(p)
	}
	running := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) }
	ab.waitPod("follow", 20*time.Second, "Running", running)

	// kubectl logs -f: the lines so far, then each new line as it is written.
	cmd := ab.kubectlCmd("logs", "-f", "follow")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got, ok := <-lines:
			if !ok || got != want {
				t.Fatalf("kubectl logs -f: got line %q (open %v), want %q", got, ok, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("kubectl logs -f: no line %q within 15s", want)
		}
	}
	next("first")
	for i, want := range []string{"after-0", "after-1"} {
		if err := os.WriteFile(gate+"."+string(rune('0'+i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		next(want)
	}

	// --limit-bytes cuts the output, and ends a follow, there; --since
	// reaching back before the start selects the whole run; what Portal
	// cannot answer exactly (a later --since-time, --timestamps) is refused
	// by name rather than answered with the whole log.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "follow", "--limit-bytes=8"}, "first\naf"},
		{[]string{"logs", "-f", "follow", "--limit-bytes=8"}, "first\naf"},
		{[]string{"logs", "follow", "--since=1h"}, "first\nafter-0\nafter-1\n"},
	} {
		if got := ab.server.MustKubectl(tc.args...); got != tc.want {
			t.Errorf("kubectl %s: got %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "follow", "--timestamps"}, "timestamps: not supported: Portal writes container output straight to log files, without per-line times"},
		{[]string{"logs", "follow", "--since-time=2099-01-01T00:00:00Z"}, "sinceTime: not supported after the container started"},
	} {
		if got, err := ab.server.Kubectl(tc.args...); err == nil || !strings.Contains(got, tc.want) {
			t.Errorf("kubectl %s: got %q, %v; want an error saying %q", strings.Join(tc.args, " "), got, err, tc.want)
		}
	}

	// kubectl logs --previous after a restart; plain logs show the new run.
	ab.waitPod("restarter", 40*time.Second, "restarted once and Running", func(p *corev1.Pod) bool {
		s := p.Status.ContainerStatuses
		return len(s) == 1 && s[0].RestartCount == 1 && s[0].State.Running != nil
	})
	if got := ab.server.MustKubectl("logs", "restarter", "--previous"); got != "run-0\n" {
		t.Errorf("kubectl logs --previous: got %q, want %q", got, "run-0\n")
	}
	waitFor(t, 10*time.Second, func() bool { got, _ := ab.server.Kubectl("logs", "restarter"); return got == "run-1\n" })
	if got, err := ab.server.Kubectl("logs", "follow", "--previous"); err == nil || !strings.Contains(got, "previous terminated container") {
		t.Errorf("kubectl logs --previous of a container that never restarted: got %q, %v; want an error", got, err)
	}

	// preStop exec: runs in the container (its host name, its environment),
	// finishes before SIGTERM, and the pod goes once the process exits.
	ab.waitPod("hooked", 20*time.Second, "Running", running)
	t0 := time.Now()
	if err := ab.c.CoreV1().Pods("default").Delete(context.Background(), "hooked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() bool { p := ab.get("hooked"); return p == nil })
	data, _ := os.ReadFile(trace)
	if got, want := string(data), "prestop hooked from-env\nterm\n"; got != want {
		t.Errorf("preStop trace: got %q, want %q (hook in the pod, then SIGTERM)", got, want)
	}
	if d := time.Since(t0); d < time.Second {
		t.Errorf("pod gone %v after the delete, want after the hook's 1s sleep", d)
	}
}

// kubectlCmd is a kubectl command against the bed's API server, for a
// command that streams (Server.Kubectl waits for the end).
func (ab *agentBed) kubectlCmd(args ...string) *exec.Cmd {
	argv := append([]string{}, ab.server.Wrap...)
	if path, err := exec.LookPath("kubectl"); err == nil {
		argv = append(append(argv, path), args...)
	} else {
		argv = append(append(argv, framework.Binary(ab.t), "kubectl"), args...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+ab.server.Kubeconfig())
	return cmd
}
