package scheduler

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Upstream's filter failure texts, in the order upstream's filters run.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonNotReady      = "node(s) were not ready"
	reasonTaint         = "node(s) had untolerated taint {%s: %s}"
	reasonSelector      = "node(s) didn't match Pod's node affinity/selector"
)

// errNoNodes is upstream's text when the cluster has no Nodes at all.
const errNoNodes = "no nodes available to schedule pods"

// The taints a Node's state implies. Upstream's node lifecycle controller
// puts them on the Node; Portal's does not, so the scheduler reads the
// state itself and lets a Pod that tolerates the taint, as every DaemonSet
// Pod does, onto the Node anyway.
var (
	unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	notReadyTaint      = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
)

// pick returns the Node pod should be bound to: among the Nodes that fit,
// the one with the fewest Pods in count, ties broken by name. If none fits
// it returns "" and a message in upstream's "0/N nodes are available: ..."
// form.
func pick(pod *corev1.Pod, nodes []*corev1.Node, count map[string]int) (string, string) {
	if len(nodes) == 0 {
		return "", errNoNodes
	}
	f := newFilter(pod)
	reasons := map[string]int{}
	best := ""
	for _, n := range nodes {
		if r := f.unfit(n); r != "" {
			reasons[r]++
			continue
		}
		if best == "" || count[n.Name] < count[best] || (count[n.Name] == count[best] && n.Name < best) {
			best = n.Name
		}
	}
	if best != "" {
		return best, ""
	}
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return "", fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), strings.Join(parts, ", "))
}

// filter is what pick asks of every Node for one Pod, worked out once per
// Pod so that the Nodes loop only matches.
type filter struct {
	tolerations []corev1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
	// The implied taints the Pod tolerates.
	unschedulableOK, notReadyOK bool
}

func newFilter(pod *corev1.Pod) *filter {
	f := &filter{
		tolerations: pod.Spec.Tolerations,
		affinity:    nodeaffinity.GetRequiredNodeAffinity(pod),
	}
	f.unschedulableOK = f.tolerates(&unschedulableTaint)
	f.notReadyOK = f.tolerates(&notReadyTaint)
	return f
}

func (f *filter) tolerates(taint *corev1.Taint) bool {
	for i := range f.tolerations {
		if f.tolerations[i].ToleratesTaint(klog.Logger{}, taint, false) {
			return true
		}
	}
	return false
}

// unfit returns why node cannot take the Pod, "" if it can. The checks run
// in upstream's filter order (NodeUnschedulable, TaintToleration,
// NodeAffinity), Portal's readiness check standing in for the not-ready
// taint; the first that fails names the reason.
func (f *filter) unfit(node *corev1.Node) string {
	switch {
	case node.Spec.Unschedulable && !f.unschedulableOK:
		return reasonUnschedulable
	case !f.notReadyOK && !ready(node):
		return reasonNotReady
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !f.tolerates(t) {
			return fmt.Sprintf(reasonTaint, t.Key, t.Value)
		}
	}
	// A malformed affinity (one the API server's validation would refuse)
	// fits no Node, as upstream's filter treats it.
	if ok, err := f.affinity.Match(node); !ok || err != nil {
		return reasonSelector
	}
	return ""
}

func ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// responsible reports whether this scheduler should place pod.
func responsible(pod *corev1.Pod, schedulerName string) bool {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName
	}
	return pod.Spec.NodeName == "" && name == schedulerName &&
		pod.DeletionTimestamp == nil && !terminal(pod)
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
