package agent

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// isSidecar says whether c, an init container, is a sidecar: one with
// restartPolicy Always, which kubelet starts in order and keeps running.
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// initRestartPolicy is how an init container restarts under the pod's
// policy: after a failure unless the pod never restarts; one that
// succeeded is done, even under Always.
func initRestartPolicy(pod corev1.RestartPolicy) corev1.RestartPolicy {
	if pod == corev1.RestartPolicyNever {
		return corev1.RestartPolicyNever
	}
	return corev1.RestartPolicyOnFailure
}

// initContainerStatus renders init container c as kubelet does: like an
// app container, except that an init container (not a sidecar) that
// completed is ready.
func initContainerStatus(v containerView, c *corev1.Container, pod *corev1.Pod) corev1.ContainerStatus {
	s := containerStatus(v, pod)
	if !isSidecar(c) {
		s.Ready = s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
	}
	return s
}

// initFailed says whether an init container failed for good: under
// restartPolicy Never nothing restarts it, and kubelet fails the pod.
// Sidecars always restart.
func initFailed(policy corev1.RestartPolicy, spec []corev1.Container, initStatuses []corev1.ContainerStatus) bool {
	if policy != corev1.RestartPolicyNever {
		return false
	}
	for i := range spec {
		if isSidecar(&spec[i]) {
			continue
		}
		if s := statusNamed(initStatuses, spec[i].Name); s != nil && s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
			return true
		}
	}
	return false
}

// initialized is the pod's Initialized condition (status and the reason
// and message when False): True once every init container has succeeded
// (a sidecar: started), or once any app container has run, since kubelet
// never initializes a pod twice.
func initialized(pod *corev1.Pod, initStatuses, statuses []corev1.ContainerStatus) (bool, string, string) {
	for _, s := range statuses {
		if s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil {
			return true, "", ""
		}
	}
	var incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st := statusNamed(initStatuses, c.Name)
		switch {
		case st == nil:
			incomplete = append(incomplete, c.Name)
		case isSidecar(c):
			if st.Started == nil || !*st.Started {
				incomplete = append(incomplete, c.Name)
			}
		case st.State.Terminated == nil || st.State.Terminated.ExitCode != 0:
			incomplete = append(incomplete, c.Name)
		}
	}
	if len(incomplete) > 0 {
		return false, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " "))
	}
	return true, "", ""
}

// unreadySidecars names the pod's sidecars that are not ready: they count
// towards the pod's readiness as app containers do.
func unreadySidecars(pod *corev1.Pod, initStatuses []corev1.ContainerStatus) []string {
	var out []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !isSidecar(c) {
			continue
		}
		if st := statusNamed(initStatuses, c.Name); st == nil || !st.Ready {
			out = append(out, c.Name)
		}
	}
	return out
}
