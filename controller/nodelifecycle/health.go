package nodelifecycle

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// reasonNodeStatusUnknown and messageNodeStatusUnknown are upstream's
	// text for a Node whose kubelet went quiet.
	reasonNodeStatusUnknown  = "NodeStatusUnknown"
	messageNodeStatusUnknown = "Kubelet stopped posting node status."
)

// probe is what the tracker remembers about one Node's heartbeat.
type probe struct {
	renewTime time.Time // newest Lease spec.renewTime seen; zero: none yet
	probeTime time.Time // controller time at which it was first seen
}

// healthTracker decides which Nodes have gone quiet. It never compares a
// Lease's renewTime with the controller's clock: a renewal counts from the
// moment the controller sees renewTime move, as upstream's probeTimestamp
// does, so clock skew and controller restarts cannot mark a live node. The
// zero value is ready to use; it is not safe for concurrent use.
type healthTracker struct {
	probes map[string]probe
}

// stale records what is known of node name now and reports whether it has
// shown no sign of life for longer than grace. lease may be nil.
func (h *healthTracker) stale(name string, lease *coordinationv1.Lease, now time.Time, grace time.Duration) bool {
	if h.probes == nil {
		h.probes = map[string]probe{}
	}
	p, seen := h.probes[name]
	if !seen {
		p.probeTime = now
	}
	if lease != nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.Time.After(p.renewTime) {
		p.renewTime, p.probeTime = lease.Spec.RenewTime.Time, now
	}
	h.probes[name] = p
	return now.Sub(p.probeTime) > grace
}

// retain forgets every Node not in keep.
func (h *healthTracker) retain(keep map[string]bool) {
	for name := range h.probes {
		if !keep[name] {
			delete(h.probes, name)
		}
	}
}

// nodeReady returns node's Ready condition status; Unknown if it has none.
func nodeReady(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// markNodeUnknown returns a copy of node with its Ready condition Unknown,
// or nil if it already is. The last heartbeat time is kept: it is the
// agent's, and says when it was last heard from.
func markNodeUnknown(node *corev1.Node, now time.Time) *corev1.Node {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
			return nil
		}
	}
	out := node.DeepCopy()
	cond := corev1.NodeCondition{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionUnknown,
		Reason:             reasonNodeStatusUnknown,
		Message:            messageNodeStatusUnknown,
		LastTransitionTime: metav1.NewTime(now),
	}
	for i, c := range out.Status.Conditions {
		if c.Type == corev1.NodeReady {
			cond.LastHeartbeatTime = c.LastHeartbeatTime
			out.Status.Conditions[i] = cond
			return out
		}
	}
	out.Status.Conditions = append(out.Status.Conditions, cond)
	return out
}

// markPodNotReady returns a copy of pod with its Ready condition False, or
// nil if it has none or it is not True. Like upstream's MarkPodsNotReady it
// changes only the status, keeping reason and message.
func markPodNotReady(pod *corev1.Pod, now time.Time) *corev1.Pod {
	for i, c := range pod.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		if c.Status != corev1.ConditionTrue {
			return nil
		}
		out := pod.DeepCopy()
		out.Status.Conditions[i].Status = corev1.ConditionFalse
		out.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		return out
	}
	return nil
}
