package scheduler

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"portal.dev/portal/controller/internal/nodetaint"
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
}

func newFilter(pod *corev1.Pod) *filter {
	return &filter{
		tolerations: pod.Spec.Tolerations,
		affinity:    nodeaffinity.GetRequiredNodeAffinity(pod),
	}
}

// unfit returns why node cannot take the Pod, "" if it can. The checks run
// in upstream's filter order (NodeUnschedulable, TaintToleration,
// NodeAffinity), the taints the Node's state implies standing in for those
// upstream's node lifecycle controller would put on it; the first that
// fails names the reason.
func (f *filter) unfit(node *corev1.Node) string {
	for _, t := range nodetaint.Implied(node) {
		if nodetaint.Tolerates(f.tolerations, &t) {
			continue
		}
		if t.Key == corev1.TaintNodeUnschedulable {
			return reasonUnschedulable
		}
		return reasonNotReady
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if nodetaint.Blocking(t) && !nodetaint.Tolerates(f.tolerations, t) {
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
