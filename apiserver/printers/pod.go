package printers

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeUnreachablePodReason is the status reason the node lifecycle controller
// gives pods on a node that stopped responding; such a pod being deleted shows
// as "Unknown" rather than "Terminating", since nobody can confirm it stopped.
const nodeUnreachablePodReason = "NodeLost"

var podPrinter = printer[*corev1.Pod]{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
		column("Status", "string", "The aggregate status of the containers in this pod."),
		column("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
		ageColumn,
		wideColumn("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
		wideColumn("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
		wideColumn("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
		wideColumn("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
	},
	cells:      podCells,
	conditions: podConditions,
}

func podCells(pod *corev1.Pod) []any {
	s := summarizePod(pod)
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return []any{
		pod.Name,
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.reason,
		s.restartsCell(),
		age(pod.CreationTimestamp),
		noneIfEmpty(podIP),
		noneIfEmpty(pod.Spec.NodeName),
		noneIfEmpty(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}
}

// podConditions marks finished pods so clients can tell them apart.
func podConditions(pod *corev1.Pod) []metav1.TableRowCondition {
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// podSummary is what the READY, STATUS and RESTARTS cells are made of.
type podSummary struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  metav1.Time
}

// restartsCell renders "3", or "3 (5m ago)" once a restart time is known.
func (s *podSummary) restartsCell() string {
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		return fmt.Sprintf("%d (%s ago)", s.restarts, age(s.lastRestart))
	}
	return strconv.Itoa(s.restarts)
}

// summarizePod follows upstream's order of precedence for the STATUS cell:
// phase or status reason first, then init containers, then app containers,
// then deletion.
func summarizePod(pod *corev1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.reason = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := map[string]bool{}
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			sidecars[pod.Spec.InitContainers[i].Name] = true
			s.total++
		}
	}

	initializing, sidecarRestarts, sidecarLastRestart := s.addInitContainers(pod, sidecars)
	if !initializing || hasPodCondition(pod, corev1.PodInitialized) {
		// Once initialized, only sidecars still count towards restarts:
		// a finished init container's retries are history.
		s.restarts, s.lastRestart = sidecarRestarts, sidecarLastRestart
		s.addContainers(pod)
	}

	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason:
		s.reason = "Unknown"
	case pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
		s.reason = "Terminating"
	}
	return s
}

// addInitContainers walks init container statuses up to the first one that
// has not finished (sidecars that started count as finished) and reports
// whether the pod is still initializing, plus the restarts of sidecars.
func (s *podSummary) addInitContainers(pod *corev1.Pod, sidecars map[string]bool) (initializing bool, sidecarRestarts int, sidecarLastRestart metav1.Time) {
	for i, c := range pod.Status.InitContainerStatuses {
		s.restarts += int(c.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, c)
		if sidecars[c.Name] {
			sidecarRestarts += int(c.RestartCount)
			sidecarLastRestart = laterTermination(sidecarLastRestart, c)
		}

		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecars[c.Name] && c.Started != nil && *c.Started:
			if c.Ready {
				s.ready++
			}
			continue
		case c.State.Terminated != nil:
			s.reason = "Init:" + terminatedReason(c.State.Terminated)
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			s.reason = "Init:" + c.State.Waiting.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		return true, sidecarRestarts, sidecarLastRestart
	}
	return false, sidecarRestarts, sidecarLastRestart
}

// addContainers folds app container statuses into the summary. It walks
// them backwards so that the first container with something to say about
// its state sets the reason.
func (s *podSummary) addContainers(pod *corev1.Pod) {
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := pod.Status.ContainerStatuses[i]
		s.restarts += int(c.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, c)
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			s.reason = c.State.Waiting.Reason
		case c.State.Terminated != nil:
			s.reason = terminatedReason(c.State.Terminated)
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			s.ready++
		}
	}
	// A container that completed while another still runs does not make the
	// pod "Completed".
	if s.reason == "Completed" && hasRunning {
		if hasPodCondition(pod, corev1.PodReady) {
			s.reason = "Running"
		} else {
			s.reason = "NotReady"
		}
	}
}

// terminatedReason is the reason a container stopped, or its signal or exit
// code when the runtime gave no reason.
func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

// laterTermination returns the later of last and the time the container last
// terminated.
func laterTermination(last metav1.Time, c corev1.ContainerStatus) metav1.Time {
	if t := c.LastTerminationState.Terminated; t != nil && last.Before(&t.FinishedAt) {
		return t.FinishedAt
	}
	return last
}

// isSidecar reports whether an init container keeps running alongside the app
// containers (restartPolicy: Always).
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// hasPodCondition reports whether the pod's first condition of type t is true.
func hasPodCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readinessGates renders "passed/total" for the pod's readiness gates.
func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	passed := 0
	for _, gate := range pod.Spec.ReadinessGates {
		if hasPodCondition(pod, gate.ConditionType) {
			passed++
		}
	}
	return fmt.Sprintf("%d/%d", passed, len(pod.Spec.ReadinessGates))
}
