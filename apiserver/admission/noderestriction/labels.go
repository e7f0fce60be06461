package noderestriction

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// kubeletLabels are the Kubernetes labels a kubelet sets on its own Node,
// upstream's list: a node may set these and labels under the kubelet's
// and the node's own label namespaces, and no other *.kubernetes.io or
// *.k8s.io label.
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

// modifiedLabels returns, sorted, the keys whose values differ between a
// and b, including keys only one of them has.
func modifiedLabels(a, b map[string]string) []string {
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

// forbiddenLabels returns, joined with ", ", those of keys a node may not
// set, change or remove on its own Node; "" when it may touch all.
func forbiddenLabels(keys []string) string {
	var bad []string
	for _, k := range keys {
		ns, _, found := strings.Cut(k, "/")
		if !found {
			continue
		}
		switch {
		case inNamespace(ns, corev1.LabelNamespaceNodeRestriction):
			// Set by administrators, so that workloads can trust them to
			// say what a node is.
			bad = append(bad, k)
		case (inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")) && !isKubeletLabel(k, ns):
			bad = append(bad, k)
		}
	}
	return strings.Join(bad, ", ")
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
