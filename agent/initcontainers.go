//go:build linux

package agent

import (
	"context"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// syncInitContainers runs the pod's init containers one at a time, in
// order, each to success, as kubelet does. A failed one restarts with the
// back-off unless the pod's restartPolicy is Never, which fails the pod.
// A sidecar (restartPolicy Always) is not waited for to finish: the next
// container starts once it runs and its startup probe passed, and it
// restarts whenever it exits, for the pod's whole life. It returns when to
// look again and whether the pod is initialized, so the app containers may
// start. Once an app container has run, the pod was initialized: init
// containers never run again, sidecars go on.
func (a *Agent) syncInitContainers(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime) (time.Duration, bool) {
	initialized := appStarted(pod, rt)
	next := time.Duration(0)
	soonest := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cr := rt.ctr(c.Name)
		if isSidecar(c) {
			soonest(a.syncContainer(ctx, w, pod, rt, c, corev1.RestartPolicyAlways))
			if cr.proc != nil && cr.started.Load() {
				cr.st.StartedOnce = true
			}
			// Once it has started, a crash of it holds nothing up: it
			// restarts with its back-off while the next ones go on.
			if !initialized && !cr.st.StartedOnce {
				return next, false
			}
			continue
		}
		if initialized || initSucceeded(cr) {
			continue
		}
		soonest(a.syncContainer(ctx, w, pod, rt, c, initRestartPolicy(pod.Spec.RestartPolicy)))
		if !initSucceeded(cr) {
			return next, false
		}
		// It just finished: the next one starts in this same sync.
	}
	return next, true
}

// initSucceeded says whether an init container's last run ended with 0.
func initSucceeded(cr *ctrRuntime) bool {
	return cr.proc == nil && cr.st.Exited != nil && cr.st.Exited.ExitCode == 0
}

// appStarted says whether any app container of the pod has ever been
// started: kubelet's sign that the pod was initialized.
func appStarted(pod *corev1.Pod, rt *podRuntime) bool {
	for _, c := range pod.Spec.Containers {
		if st, ok := rt.st.Containers[c.Name]; ok && st.Ran {
			return true
		}
	}
	return false
}

// initContainerStatuses are the pod's status.initContainerStatuses.
func (a *Agent) initContainerStatuses(pod *corev1.Pod, rt *podRuntime) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		policy := initRestartPolicy(pod.Spec.RestartPolicy)
		if isSidecar(c) {
			policy = corev1.RestartPolicyAlways
		}
		// A sidecar is ready as an app container is; initContainerStatus
		// makes a regular one ready once it completed.
		out = append(out, initContainerStatus(rt.view(c, policy), c, pod))
	}
	return out
}

// exitFile is where the init helper records how init container c ends
// (cleared for this run), or "" for other containers: after an agent
// restart only that file tells whether an init container succeeded. App
// containers go without, as they would keep a helper process each for
// their whole life.
func (rt *podRuntime) exitFile(pod *corev1.Pod, c *corev1.Container) (string, error) {
	regularInit := false
	for i := range pod.Spec.InitContainers {
		if ic := &pod.Spec.InitContainers[i]; ic.Name == c.Name && !isSidecar(ic) {
			regularInit = true
		}
	}
	if !regularInit {
		return "", nil
	}
	dir := filepath.Join(rt.dir, "exit")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	p := filepath.Join(dir, c.Name)
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	return p, nil
}
