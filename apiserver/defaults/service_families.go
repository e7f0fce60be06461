package defaults

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"portal.dev/portal/apiserver/svcconfig"
	"portal.dev/portal/apiserver/validation"
)

// ServiceIPFamilies does the Service defaulting that upstream's registry
// does before allocating IPs (storage.beginCreate/beginUpdate and
// alloc.initIPFamilyFields), for a create (old == nil) or an update:
//
//   - on update, values allocated earlier (clusterIP(s), nodePorts,
//     healthCheckNodePort) that the client left out are copied from old, so
//     re-applying the same manifest succeeds;
//   - clusterIP and clusterIPs are synced ("None" stays ["None"]);
//   - ipFamilyPolicy defaults to SingleStack (RequireDualStack for headless
//     services without a selector, the old policy on update), ipFamilies is
//     inferred from clusterIPs and filled from the cluster's families.
//
// It returns upstream's errors when the requested families cannot be
// served (e.g. RequireDualStack on a single-stack cluster), in which case the
// Service must be rejected. Svc should already have had Service applied.
func ServiceIPFamilies(svc, old *corev1.Service, cfg ServiceConfig) field.ErrorList {
	if old != nil {
		patchAllocatedValues(svc, old)
	}
	normalizeClusterIPs(svc, old)
	return initIPFamilyFields(svc, old, cfg)
}

// patchAllocatedValues copies allocated values the client omitted from old.
func patchAllocatedValues(svc, old *corev1.Service) {
	if needsClusterIP(old) && needsClusterIP(svc) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 && len(old.Spec.ClusterIPs) > 0 {
			svc.Spec.ClusterIPs = old.Spec.ClusterIPs
		}
	}
	if needsNodePort(old) && needsNodePort(svc) {
		patchNodePorts(svc, old)
	}
	if needsHealthCheckNodePort(old) && needsHealthCheckNodePort(svc) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

// patchNodePorts fills zero nodePorts from the old port of the same name,
// unless that node port is still in use by another port of the new object.
func patchNodePorts(svc, old *corev1.Service) {
	inNew := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			inNew[p.NodePort] = true
		}
	}
	byName := map[string]int32{}
	for _, p := range old.Spec.Ports {
		byName[p.Name] = p.NodePort
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort != 0 {
			continue
		}
		if oldVal := byName[p.Name]; !inNew[oldVal] {
			p.NodePort = oldVal
		}
	}
}

// normalizeClusterIPs keeps clusterIP and clusterIPs in step. Old clients
// only know clusterIP; new ones must send both.
func normalizeClusterIPs(svc, old *corev1.Service) {
	if old == nil {
		if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		}
		return
	}
	// An old client patching some other field dropped clusterIPs.
	if len(old.Spec.ClusterIPs) > 0 && len(svc.Spec.ClusterIPs) == 0 && old.Spec.ClusterIP == svc.Spec.ClusterIP {
		svc.Spec.ClusterIPs = old.Spec.ClusterIPs
	}
	if old.Spec.ClusterIP == svc.Spec.ClusterIP || !slices.Equal(old.Spec.ClusterIPs, svc.Spec.ClusterIPs) {
		// Unchanged, or both changed: validation judges the result.
		return
	}
	if svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIPs = nil
	} else {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

// initIPFamilyFields is upstream's alloc.initIPFamilyFields.
func initIPFamilyFields(svc, old *corev1.Service, cfg ServiceConfig) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svcconfig.KeepsPreferDualStack(svc, old) {
		return nil
	}
	defaultIPFamilyPolicy(svc, old)
	// Loose pre-validation so the steps below need not handle malformed input.
	if errs := validation.ValidateServiceClusterIPs(svc, old); len(errs) != 0 {
		return errs
	}
	var errs field.ErrorList
	if old != nil {
		errs = append(errs, prepareFamilyUpdate(svc, old)...)
	}
	errs = append(errs, checkSingleStackPolicy(svc)...)
	errs = append(errs, inferFamiliesFromClusterIPs(svc, cfg)...)
	if len(errs) > 0 {
		return errs
	}
	if isHeadlessSelectorless(svc) {
		defaultHeadlessSelectorlessFamilies(svc, cfg)
		return nil
	}
	if errs := checkFamiliesConfigured(svc, cfg); len(errs) > 0 {
		return errs
	}
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = []corev1.IPFamily{cfg.PrimaryFamily()}
	}
	if *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack && len(svc.Spec.IPFamilies) == 1 && cfg.DualStack() {
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, svcconfig.OtherFamily(svc.Spec.IPFamilies[0]))
	}
	return nil
}

// defaultIPFamilyPolicy picks a policy when the client gave none: the old
// one on update, so a PUT that drops the field does not change stack-ness;
// RequireDualStack for headless selectorless services, whose endpoints may
// be of either family; SingleStack otherwise.
func defaultIPFamilyPolicy(svc, old *corev1.Service) {
	if svc.Spec.IPFamilyPolicy != nil {
		return
	}
	var p corev1.IPFamilyPolicy
	switch {
	case old != nil && old.Spec.IPFamilyPolicy != nil:
		p = *old.Spec.IPFamilyPolicy
	case isHeadlessSelectorless(svc):
		p = corev1.IPFamilyPolicyRequireDualStack
	default:
		p = corev1.IPFamilyPolicySingleStack
	}
	svc.Spec.IPFamilyPolicy = &p
}

func isHeadlessSelectorless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0
}

// prepareFamilyUpdate handles a downgrade: with policy SingleStack and IPs
// and families otherwise untouched, the secondaries are dropped; with any
// other policy, dropping them is an error.
func prepareFamilyUpdate(svc, old *corev1.Service) field.ErrorList {
	policyPath := field.NewPath("spec", "ipFamilyPolicy")
	if *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack {
		if slices.Equal(old.Spec.ClusterIPs, svc.Spec.ClusterIPs) && len(svc.Spec.ClusterIPs) > 1 {
			svc.Spec.ClusterIPs = svc.Spec.ClusterIPs[0:1]
		}
		if slices.Equal(old.Spec.IPFamilies, svc.Spec.IPFamilies) && len(svc.Spec.IPFamilies) > 1 {
			svc.Spec.IPFamilies = svc.Spec.IPFamilies[0:1]
		}
		return nil
	}
	var errs field.ErrorList
	if len(svc.Spec.ClusterIPs) > 0 && len(svc.Spec.ClusterIPs) < len(old.Spec.ClusterIPs) {
		errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary cluster IP"))
	}
	if len(svc.Spec.IPFamilies) > 0 && len(svc.Spec.IPFamilies) < len(old.Spec.IPFamilies) {
		errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary IP family"))
	}
	return errs
}

func checkSingleStackPolicy(svc *corev1.Service) field.ErrorList {
	if *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		return nil
	}
	var errs field.ErrorList
	policyPath := field.NewPath("spec", "ipFamilyPolicy")
	if len(svc.Spec.ClusterIPs) == 2 {
		errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
	}
	if len(svc.Spec.IPFamilies) == 2 {
		errs = append(errs, field.Invalid(policyPath, svc.Spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
	}
	return errs
}

// inferFamiliesFromClusterIPs appends the family of each requested cluster
// IP that has no ipFamilies entry yet (the entries that exist were already
// checked to match).
func inferFamiliesFromClusterIPs(svc *corev1.Service, cfg ServiceConfig) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range svc.Spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(svc.Spec.IPFamilies) {
			continue
		}
		fam := familyOfIP(ip)
		if !cfg.HasFamily(fam) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), svc.Spec.ClusterIPs,
				fmt.Sprintf("%s is not configured on this cluster", fam)))
			continue
		}
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, fam)
	}
	return errs
}

// defaultHeadlessSelectorlessFamilies: such services may be dual-stack even
// on a single-stack cluster, since no cluster IP is allocated.
func defaultHeadlessSelectorlessFamilies(svc *corev1.Service, cfg ServiceConfig) {
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = []corev1.IPFamily{cfg.PrimaryFamily()}
	}
	if len(svc.Spec.IPFamilies) < 2 && *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, svcconfig.OtherFamily(svc.Spec.IPFamilies[0]))
	}
}

func checkFamiliesConfigured(svc *corev1.Service, cfg ServiceConfig) field.ErrorList {
	var errs field.ErrorList
	if *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack && !cfg.DualStack() {
		errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy,
			"this cluster is not configured for dual-stack services"))
	}
	for i, fam := range svc.Spec.IPFamilies {
		if !cfg.HasFamily(fam) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilies").Index(i), fam, "not configured on this cluster"))
		}
	}
	return errs
}

// familyOfIP returns the family of a textual IP. Callers pass IPs that
// validation has accepted; anything else reads as IPv6, which no caller acts
// on without further checks.
func familyOfIP(ip string) corev1.IPFamily {
	if parsed := netutils.ParseIPSloppy(ip); parsed != nil && parsed.To4() != nil {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}
