package podgc

import (
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
	terminatingUnscheduled   reason = "terminating_unscheduled"
	orphanedConditionReason         = "DeletionByPodGC"
	orphanedConditionMessage        = "PodGC: node no longer exists"
)

// decide says what to do with pod. node is its Node from the cache, nil
// when the cache has none of that name; a Pod whose Node is missing is
// orphaned only once the API confirms it (see Controller), so decide
// reports orphaned as a suspicion.
func decide(pod *corev1.Pod, node *corev1.Node) reason {
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
