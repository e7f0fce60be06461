package agent

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerView is what the status of one container is made from.
type containerView struct {
	Name, Image, ID string
	RestartCount    int32
	Running         bool
	StartedAt       time.Time
	// Exited is the current instance's end when it is not running and not
	// restarted (yet).
	Exited *corev1.ContainerStateTerminated
	// Last is the previous instance's end.
	Last *corev1.ContainerStateTerminated
	// BackOff is how long the restart waits, when it waits.
	BackOff time.Duration
	// WaitingReason and WaitingMessage explain a container that never ran.
	WaitingReason, WaitingMessage string
	Started, Ready                bool
}

// containerStatus renders v as kubelet reports a container.
func containerStatus(v containerView, pod *corev1.Pod) corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: v.Name, Image: v.Image, ImageID: "", ContainerID: v.ID,
		RestartCount: v.RestartCount, Started: &v.Started, Ready: v.Ready && v.Running}
	if !v.Running {
		f := false
		s.Started = &f
	}
	if v.Last != nil {
		s.LastTerminationState.Terminated = v.Last.DeepCopy()
	}
	switch {
	case v.Running:
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(v.StartedAt)}
	case v.Exited != nil && v.BackOff > 0:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %v restarting failed container=%s pod=%s_%s(%s)", v.BackOff, v.Name, pod.Name, pod.Namespace, pod.UID)}
		s.LastTerminationState.Terminated = v.Exited.DeepCopy()
	case v.Exited != nil:
		s.State.Terminated = v.Exited.DeepCopy()
	default:
		reason := v.WaitingReason
		switch {
		case reason != "":
		case len(pod.Spec.InitContainers) > 0:
			// kubelet's word for a container of a pod with init
			// containers that has not been created yet.
			reason = "PodInitializing"
		default:
			reason = "ContainerCreating"
		}
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: v.WaitingMessage}
	}
	return s
}

// statusNamed is the status of the container called name, or nil.
func statusNamed(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// podPhase is kubelet's phase for the containers' states under policy.
func podPhase(policy corev1.RestartPolicy, spec []corev1.Container, statuses []corev1.ContainerStatus) corev1.PodPhase {
	var running, waiting, stopped, succeeded, unknown int
	for _, c := range spec {
		st := statusNamed(statuses, c.Name)
		switch {
		case st == nil:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		switch {
		case policy == corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case policy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// podConditions are the pod's conditions: the ones the agent owns computed
// now, the others (PodScheduled, DisruptionTarget, readiness gates) kept
// from old. A condition whose status did not change keeps its transition
// time.
func podConditions(pod *corev1.Pod, initStatuses, statuses []corev1.ContainerStatus, phase corev1.PodPhase, sandboxReady bool, now time.Time) []corev1.PodCondition {
	notReady := unreadySidecars(pod, initStatuses)
	for _, c := range pod.Spec.Containers {
		if st := statusNamed(statuses, c.Name); st == nil || !st.Ready {
			notReady = append(notReady, c.Name)
		}
	}
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		return c
	}
	containersReady := cond(corev1.ContainersReady, len(notReady) == 0, "ContainersNotReady",
		fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " ")))
	ready := containersReady
	ready.Type = corev1.PodReady
	if ready.Status == corev1.ConditionTrue {
		var gates []string
		for _, g := range pod.Spec.ReadinessGates {
			ok := false
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
					ok = true
				}
			}
			if !ok {
				gates = append(gates, string(g.ConditionType))
			}
		}
		if len(gates) > 0 {
			ready = cond(corev1.PodReady, false, "ReadinessGatesNotReady",
				fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gates[0]))
		}
	}
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		containersReady = cond(corev1.ContainersReady, false, "PodCompleted", "")
		ready = cond(corev1.PodReady, false, "PodCompleted", "")
	}
	initOK, initReason, initMsg := initialized(pod, initStatuses, statuses)
	own := []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, sandboxReady, "", ""),
		cond(corev1.PodInitialized, initOK, initReason, initMsg),
		ready,
		containersReady,
	}
	ts := metav1.NewTime(now.Truncate(time.Second))
	var out []corev1.PodCondition
	for _, old := range pod.Status.Conditions {
		owned := false
		for _, c := range own {
			owned = owned || c.Type == old.Type
		}
		if !owned {
			out = append(out, old)
		}
	}
	for _, c := range own {
		c.LastTransitionTime = ts
		for _, old := range pod.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		out = append(out, c)
	}
	return out
}

// restarts says whether a container that ended with code restarts under
// policy.
func restarts(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// backOff is kubelet's container restart back-off: the first restart is
// immediate, then 10 s doubling to 5 min; a container that ran for twice
// the maximum starts over.
type backOff struct {
	Delay time.Duration `json:"delay,omitempty"`
}

const (
	backOffInitial = 10 * time.Second
	backOffMax     = 5 * time.Minute
)

// next returns how long to wait before restarting a container that ran
// for ran, and advances the back-off.
func (b *backOff) next(ran time.Duration) time.Duration {
	if ran >= 2*backOffMax {
		b.Delay = 0
	}
	d := b.Delay
	switch {
	case b.Delay == 0:
		b.Delay = backOffInitial
	default:
		b.Delay = min(2*b.Delay, backOffMax)
	}
	return d
}
