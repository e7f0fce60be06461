package svcconfig

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// KeepsPreferDualStack reports whether an update leaves a PreferDualStack
// Service's cluster IPs and families exactly as stored. Upstream then
// leaves the family fields alone, neither defaulting nor checking them
// against the cluster's families, so a cluster turning single- or
// dual-stack never silently adds or removes an IP from an existing
// Service. Defaulting and validation must agree on it, so it lives here.
func KeepsPreferDualStack(svc, old *corev1.Service) bool {
	if old == nil || svc.Spec.IPFamilyPolicy == nil || old.Spec.Type != svc.Spec.Type {
		return false
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		return false
	}
	if *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		return false
	}
	if old.Spec.IPFamilyPolicy != nil && *old.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack {
		return false
	}
	return slices.Equal(old.Spec.ClusterIPs, svc.Spec.ClusterIPs) && slices.Equal(old.Spec.IPFamilies, svc.Spec.IPFamilies)
}
