package statefulset

import (
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/controller/internal/workload"
)

// Labels every pod of a StatefulSet carries, with upstream's names so that
// Services, kubectl and users' selectors written for Kubernetes work.
const (
	// PodNameLabel holds the pod's own name, so that a Service can select
	// exactly one member of the set.
	PodNameLabel = appsv1.StatefulSetPodNameLabel
	// PodIndexLabel holds the pod's ordinal.
	PodIndexLabel = appsv1.PodIndexLabel
	// RevisionLabel names the ControllerRevision the pod was made from.
	RevisionLabel = workload.RevisionHashLabel
)

// startOrdinal is the first ordinal of set: spec.ordinals.start, or 0.
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// replicas is spec.replicas, defaulted to 1 as the API server does.
func replicas(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// podName is the name of the pod at ordinal in set.
func podName(set *appsv1.StatefulSet, ordinal int) string {
	return set.Name + "-" + strconv.Itoa(ordinal)
}

// ordinalOf returns the ordinal in a pod's name if the name is one of
// set's ("<set>-<non-negative integer>"), and false otherwise.
func ordinalOf(set *appsv1.StatefulSet, pod *corev1.Pod) (int, bool) {
	rest, ok := strings.CutPrefix(pod.Name, set.Name+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// newPod builds the pod at ordinal from set's template (which is the
// template of the revision named revision), with the set's identity.
func newPod(set *appsv1.StatefulSet, revision string, ordinal int) *corev1.Pod {
	pod := workload.PodFromTemplate(&set.Spec.Template, set, kind, podName(set, ordinal))
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[RevisionLabel] = revision
	setIdentity(set, pod, ordinal)
	return pod
}

// setIdentity gives pod the hostname, subdomain and labels of ordinal.
func setIdentity(set *appsv1.StatefulSet, pod *corev1.Pod, ordinal int) {
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[PodNameLabel] = pod.Name
	pod.Labels[PodIndexLabel] = strconv.Itoa(ordinal)
}

// identityMatches reports whether pod carries the identity of its ordinal;
// a pod that does not (a user edited its labels) is fixed in place.
func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod, ordinal int) bool {
	return pod.Spec.Hostname == pod.Name &&
		pod.Spec.Subdomain == set.Spec.ServiceName &&
		pod.Labels[PodNameLabel] == pod.Name &&
		pod.Labels[PodIndexLabel] == strconv.Itoa(ordinal)
}

func revisionOf(pod *corev1.Pod) string { return pod.Labels[RevisionLabel] }

func isTerminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }

func isCreated(pod *corev1.Pod) bool { return pod.Status.Phase != "" }

// isFinished reports a pod that has stopped for good: the controller
// deletes it and makes it again under the same name.
func isFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

func isRunningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && podutil.IsReady(pod)
}

// isAvailable reports a running pod that has been ready for
// minReadySeconds at now, as upstream's isRunningAndAvailable.
func isAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	return isRunningAndReady(pod) && workload.IsAvailable(pod, minReadySeconds, now)
}

// isHealthy is what OrderedReady waits for before touching the next pod:
// running, ready for minReadySeconds and not on its way out.
func isHealthy(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	return !isTerminating(pod) && isAvailable(pod, minReadySeconds, now)
}
