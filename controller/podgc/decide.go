package podgc

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/controller/internal/nodetaint"
)

// reason is why the collector deletes a Pod; its text is the reason label
// of upstream's pod_gc_collector metrics.
type reason string

const (
	keep                     reason = ""
	orphaned                 reason = "orphaned"
	terminatingOutOfService  reason = "terminating_out_of_service"
	terminatingNotReady      reason = "terminating_node_not_ready"
	terminatingUnscheduled   reason = "terminating_unscheduled"
	terminated               reason = "terminated"
	orphanedConditionReason         = "DeletionByPodGC"
	orphanedConditionMessage        = "PodGC: node no longer exists"
)

// NotReadyDeleteMargin is how long past its deletion timestamp (the
// moment its grace period ends) a terminating Pod on a Node that is not
// Ready is left for the node agent before it is force-deleted. A node
// agent that is only cut off for a while (a reboot, a network blip)
// finishes its Pods well within it; one that stays gone would otherwise
// hold them, and their namespace, for good.
const NotReadyDeleteMargin = 5 * time.Minute

// decide says what to do with pod at now. node is its Node from the cache,
// nil when the cache has none of that name; a Pod whose Node is missing is
// orphaned only once the API confirms it (see Controller), so decide
// reports orphaned as a suspicion.
func decide(pod *corev1.Pod, node *corev1.Node, now time.Time) reason {
	terminating := pod.DeletionTimestamp != nil
	switch {
	case pod.Spec.NodeName == "":
		if terminating {
			return terminatingUnscheduled
		}
		return keep
	case node == nil:
		return orphaned
	case terminating && !nodetaint.Ready(node) && hasTaint(node, corev1.TaintNodeOutOfService):
		return terminatingOutOfService
	case terminating && !nodetaint.Ready(node) && now.After(pod.DeletionTimestamp.Add(NotReadyDeleteMargin)):
		return terminatingNotReady
	}
	return keep
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// failed returns pod's status marked Failed, with cond set when given, or
// nil when the Pod has finished already and needs no status write.
func failed(pod *corev1.Pod, cond *corev1.PodCondition) *corev1.Pod {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	out := pod.DeepCopy()
	out.Status.Phase = corev1.PodFailed
	if cond == nil {
		return out
	}
	for i := range out.Status.Conditions {
		if out.Status.Conditions[i].Type == cond.Type {
			out.Status.Conditions[i] = *cond
			return out
		}
	}
	out.Status.Conditions = append(out.Status.Conditions, *cond)
	return out
}

// isTerminated says whether pod has finished (Succeeded or Failed), as
// upstream counts Pods for its threshold.
func isTerminated(pod *corev1.Pod) bool {
	p := pod.Status.Phase
	return p != corev1.PodPending && p != corev1.PodRunning && p != corev1.PodUnknown
}

// overThreshold returns the terminated Pods to delete so that at most
// threshold are left, in upstream's order: evicted Pods first (so that
// the finished Pods of Jobs and other controllers are kept longest), then
// the oldest, by name among equals. A threshold of 0 or less keeps all.
func overThreshold(pods []*corev1.Pod, threshold int) []*corev1.Pod {
	if threshold <= 0 {
		return nil
	}
	var done []*corev1.Pod
	for _, p := range pods {
		if isTerminated(p) {
			done = append(done, p)
		}
	}
	if len(done) <= threshold {
		return nil
	}
	slices.SortFunc(done, func(a, b *corev1.Pod) int {
		if ea, eb := evicted(a), evicted(b); ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return done[:len(done)-threshold]
}

// evicted says whether the node agent evicted pod.
func evicted(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == "Evicted"
}
