package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedIPFamilies       = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	supportedIPFamilyPolicies = []corev1.IPFamilyPolicy{
		corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack, corev1.IPFamilyPolicySingleStack,
	}
)

// ValidateServiceClusterIPs validates spec.clusterIP, spec.clusterIPs,
// spec.ipFamilies and spec.ipFamilyPolicy against each other, without
// reference to the cluster's configuration. It is exported because
// defaulting runs it before initialising the family fields, as upstream's
// registry does. old, when set, lets stored cluster IPs in non-strict forms
// pass unchanged.
func ValidateServiceClusterIPs(svc, old *corev1.Service) field.ErrorList {
	// ExternalName services must have none of these; validateExternalNameService says so.
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	errs := validateClusterIPSync(svc)
	errs = append(errs, validateIPFamilyValues(svc)...)
	ipErrs, invalid := validateClusterIPValues(svc, old)
	errs = append(errs, ipErrs...)
	// A bad or misplaced value would make the checks below report noise.
	if invalid {
		return errs
	}
	clusterIPsPath := field.NewPath("spec", "clusterIPs")
	if len(svc.Spec.ClusterIPs) > 1 && !isDualStackIPs(svc.Spec.ClusterIPs) {
		errs = append(errs, field.Invalid(clusterIPsPath, svc.Spec.ClusterIPs, "may specify no more than one IP for each IP family"))
	}
	return append(errs, validateClusterIPsMatchFamilies(svc)...)
}

// validateClusterIPSync requires clusterIPs[0] to mirror clusterIP; the
// registry syncs them before validation, so a mismatch is the user's.
func validateClusterIPSync(svc *corev1.Service) field.ErrorList {
	path := field.NewPath("spec", "clusterIPs")
	if svc.Spec.ClusterIP != "" {
		if len(svc.Spec.ClusterIPs) == 0 {
			return field.ErrorList{field.Required(path, "")}
		}
		if svc.Spec.ClusterIPs[0] != svc.Spec.ClusterIP {
			return field.ErrorList{field.Invalid(path, svc.Spec.ClusterIPs, "first value must match `clusterIP`")}
		}
		return nil
	}
	if len(svc.Spec.ClusterIPs) != 0 {
		return field.ErrorList{field.Invalid(path, svc.Spec.ClusterIPs, "must be empty when `clusterIP` is not specified")}
	}
	return nil
}

func validateIPFamilyValues(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "ipFamilies")
	seen := map[corev1.IPFamily]bool{}
	for i, fam := range svc.Spec.IPFamilies {
		if !contains(supportedIPFamilies, fam) {
			errs = append(errs, field.NotSupported(path.Index(i), fam, supportedIPFamilies))
		}
		// Refusing duplicates also makes two entries mean one of each family.
		if seen[fam] {
			errs = append(errs, field.Duplicate(path.Index(i), fam))
		}
		seen[fam] = true
	}
	// A nil policy is fine here: the registry defaults it before storing.
	if p := svc.Spec.IPFamilyPolicy; p != nil && !contains(supportedIPFamilyPolicies, *p) {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "ipFamilyPolicy"), p, supportedIPFamilyPolicies))
	}
	return errs
}

// validateClusterIPValues checks each clusterIPs entry and reports whether
// any was unusable.
func validateClusterIPValues(svc, old *corev1.Service) (field.ErrorList, bool) {
	var errs field.ErrorList
	invalid := false
	path := field.NewPath("spec", "clusterIPs")
	var oldIPs []string
	if old != nil {
		oldIPs = old.Spec.ClusterIPs
	}
	for i, ip := range svc.Spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(svc.Spec.ClusterIPs) > 1 {
				invalid = true
				errs = append(errs, field.Invalid(path, svc.Spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		ipErrs := validateLegacyIP(path.Index(i), ip, oldIPs)
		invalid = invalid || len(ipErrs) > 0
		errs = append(errs, ipErrs...)
	}
	if len(svc.Spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(path, svc.Spec.ClusterIPs, "may only hold up to 2 values"))
	}
	return errs, invalid
}

func isDualStackIPs(ips []string) bool {
	v4, v6 := false, false
	for _, ip := range ips {
		switch ipFamilyOf(ip) {
		case corev1.IPv4Protocol:
			v4 = true
		case corev1.IPv6Protocol:
			v6 = true
		}
	}
	return v4 && v6
}

func validateClusterIPsMatchFamilies(svc *corev1.Service) field.ErrorList {
	if isHeadless(svc) {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "clusterIPs")
	for i, ip := range svc.Spec.ClusterIPs {
		if i >= len(svc.Spec.IPFamilies) {
			break
		}
		fam, want := ipFamilyOf(ip), svc.Spec.IPFamilies[i]
		if (want == corev1.IPv4Protocol || want == corev1.IPv6Protocol) && fam != want {
			errs = append(errs, field.Invalid(path.Index(i), ip, fmt.Sprintf("expected an %s value as indicated by `ipFamilies[%v]`", want, i)))
		}
	}
	return errs
}

// validateServiceFamiliesConfigured checks the family fields against the
// families the cluster serves. Upstream does this while initialising the
// fields in its registry; Portal's defaults.ServiceIPFamilies does the same,
// and this repeats it for callers that validate without that step.
func validateServiceFamiliesConfigured(svc *corev1.Service, cfg ServiceConfig) field.ErrorList {
	// Headless selectorless services may name families the cluster lacks:
	// their endpoints are managed by the user, not allocated here.
	if svc.Spec.Type == corev1.ServiceTypeExternalName ||
		(svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0) {
		return nil
	}
	var errs field.ErrorList
	if p := svc.Spec.IPFamilyPolicy; p != nil && *p == corev1.IPFamilyPolicyRequireDualStack && !cfg.DualStack() {
		errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), p, "this cluster is not configured for dual-stack services"))
	}
	for i, fam := range svc.Spec.IPFamilies {
		if contains(supportedIPFamilies, fam) && !cfg.HasFamily(fam) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilies").Index(i), fam, "not configured on this cluster"))
		}
	}
	return errs
}
