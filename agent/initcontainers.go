//go:build linux

package agent

import (
	"context"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Why a pod with a sidecar (an init container with restartPolicy Always)
// does not start. Running one as an ordinary init container would wait
// forever for a process meant to run for the pod's life, or worse, let a
// sidecar that exits early pass for a finished setup step.
const (
	sidecarReason  = "SidecarNotSupported"
	sidecarMessage = "Portal does not run sidecar containers (init containers with restartPolicy Always); the pod's containers after it do not start"
)

// syncInitContainers runs the pod's init containers one at a time, in
// order, each to success, as kubelet does. A failed one restarts with the
// back-off unless the pod's restartPolicy is Never, which fails the pod.
// It returns when to look again and whether every init container has
// succeeded, so the app containers may start. Once an app container has
// run, the pod was initialized: init containers never run again.
func (a *Agent) syncInitContainers(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime) (time.Duration, bool) {
	if appStarted(pod, rt) {
		return 0, true
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cr := rt.ctr(c.Name)
		if isSidecar(c) {
			cr.waitReason, cr.waitMessage = sidecarReason, sidecarMessage
			return 0, false
		}
		if initSucceeded(cr) {
			continue
		}
		next := a.syncContainer(ctx, w, pod, rt, c, initRestartPolicy(pod.Spec.RestartPolicy))
		if !initSucceeded(cr) {
			return next, false
		}
		// It just finished: the next one starts in this same sync.
	}
	return 0, true
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
	policy := initRestartPolicy(pod.Spec.RestartPolicy)
	for _, c := range pod.Spec.InitContainers {
		cr := rt.ctr(c.Name)
		v := containerView{Name: c.Name, Image: c.Image, ID: cr.st.ID, RestartCount: cr.st.RestartCount,
			Running: cr.proc != nil, StartedAt: cr.st.StartedAt, Exited: cr.st.Exited, Last: cr.st.Last,
			WaitingReason: cr.waitReason, WaitingMessage: cr.waitMessage, Started: cr.started.Load()}
		if v.Exited != nil && !rt.terminating && !rt.cleaned && restarts(policy, v.Exited.ExitCode) && time.Until(cr.st.BackOffUntil) > 0 {
			v.BackOff = max(cr.st.BackOff.Delay/2, backOffInitial)
		}
		out = append(out, initContainerStatus(v, pod))
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
