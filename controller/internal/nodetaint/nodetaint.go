// Package nodetaint says which taints keep a Pod off a Node, for the
// scheduler and the DaemonSet controller alike. Upstream's node lifecycle
// controller puts a taint on a Node that is cordoned or not Ready; Portal's
// does not, so both read the Node's state as the taints it implies. The
// package only reads Nodes and tolerations; it never writes a Node.
package nodetaint

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// The taints a Node's state implies, as upstream's node lifecycle
// controller would add them.
var (
	// Unschedulable is implied by a cordoned Node (spec.unschedulable).
	Unschedulable = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	// NotReady is implied by a Node whose Ready condition is not True.
	NotReady = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
)

// Implied returns the taints node's state implies, Unschedulable before
// NotReady (the order upstream's scheduler filters check them).
func Implied(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	if node.Spec.Unschedulable {
		out = append(out, Unschedulable)
	}
	if !Ready(node) {
		out = append(out, NotReady)
	}
	return out
}

// Ready reports whether node's Ready condition is True.
func Ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Tolerates reports whether one of tols tolerates taint.
func Tolerates(tols []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Logger{}, taint, false) {
			return true
		}
	}
	return false
}

// Blocking reports whether taint keeps Pods that do not tolerate it off a
// Node: its effect is NoSchedule or NoExecute.
func Blocking(taint *corev1.Taint) bool {
	return taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute
}
