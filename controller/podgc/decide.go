package podgc

import (
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
