// Package nodelabels says which labels a node's agent may set on its own
// Node, as upstream's kubelet and NodeRestriction admission agree: the
// Kubernetes labels a kubelet owns, and any label outside the
// kubernetes.io and k8s.io namespaces. The API server's NodeRestriction
// plugin refuses the rest, and the agent refuses them in --node-labels
// before it starts, rather than failing to register.
package nodelabels

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// kubeletLabels are the Kubernetes labels a kubelet sets on its own Node,
// upstream's list: a node may set these and labels under the
// kubeletLabelNamespaces, and no other *.kubernetes.io or *.k8s.io label
// (node-restriction.kubernetes.io/ among them, which administrators set
// so that workloads can trust what they say about a node).
var kubeletLabels = []string{
	corev1.LabelHostname,
	corev1.LabelTopologyZone,
	corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone,
	corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType,
	corev1.LabelInstanceTypeStable,
	corev1.LabelOSStable,
	corev1.LabelArchStable,
	"beta.kubernetes.io/os",
	"beta.kubernetes.io/arch",
}

var kubeletLabelNamespaces = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}

// Modified returns, sorted, the keys whose values differ between a and b,
// including keys only one of them has.
func Modified(a, b map[string]string) []string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Forbidden returns those of keys a node may not set, change or remove on
// its own Node, in their order; none when it may touch all.
func Forbidden(keys []string) []string {
	var bad []string
	for _, k := range keys {
		ns, _, found := strings.Cut(k, "/")
		if !found {
			continue
		}
		switch {
		case inNamespace(ns, corev1.LabelNamespaceNodeRestriction):
			bad = append(bad, k)
		case (inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")) && !isKubeletLabel(k, ns):
			bad = append(bad, k)
		}
	}
	return bad
}

// inNamespace reports whether a label's prefix ns is namespace or a
// subdomain of it.
func inNamespace(ns, namespace string) bool {
	return ns == namespace || strings.HasSuffix(ns, "."+namespace)
}

func isKubeletLabel(key, ns string) bool {
	if slices.Contains(kubeletLabels, key) {
		return true
	}
	for _, n := range kubeletLabelNamespaces {
		if inNamespace(ns, n) {
			return true
		}
	}
	return false
}
