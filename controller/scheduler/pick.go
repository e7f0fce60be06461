package scheduler

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Upstream's filter failure texts, in the order upstream's filters run.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonNotReady      = "node(s) were not ready"
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
	selector := labels.SelectorFromSet(pod.Spec.NodeSelector)
	reasons := map[string]int{}
	best := ""
	for _, n := range nodes {
		if r := unfit(n, selector); r != "" {
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

// unfit returns why node cannot take a Pod with selector, "" if it can.
func unfit(node *corev1.Node, selector labels.Selector) string {
	switch {
	case node.Spec.Unschedulable:
		return reasonUnschedulable
	case !ready(node):
		return reasonNotReady
	case !selector.Matches(labels.Set(node.Labels)):
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
