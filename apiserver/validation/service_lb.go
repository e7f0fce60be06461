package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const mayOnlyLoadBalancer = "may only be used when `type` is 'LoadBalancer'"

// validateLoadBalancerFields checks the fields that only make sense for
// type LoadBalancer, other than loadBalancerClass.
func validateLoadBalancerFields(svc, old *corev1.Service) field.ErrorList {
	var oldSvc corev1.Service
	if old != nil {
		oldSvc = *old
	}
	errs := validateSourceRanges(svc, oldSvc.Spec.LoadBalancerSourceRanges)
	specPath := field.NewPath("spec")
	isLB := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if svc.Spec.AllocateLoadBalancerNodePorts != nil && !isLB {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), mayOnlyLoadBalancer))
	}
	if isLB && svc.Spec.AllocateLoadBalancerNodePorts == nil {
		// Upstream reports this one without the "spec." prefix; kept for fidelity.
		errs = append(errs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}
	if svc.Spec.LoadBalancerIP != "" {
		var oldIPs []string
		if oldSvc.Spec.LoadBalancerIP != "" {
			oldIPs = []string{oldSvc.Spec.LoadBalancerIP}
		}
		errs = append(errs, validateLegacyIP(specPath.Child("loadBalancerIP"), svc.Spec.LoadBalancerIP, oldIPs)...)
	}
	return errs
}

// validateSourceRanges checks spec.loadBalancerSourceRanges or, when that is
// empty, the older annotation carrying the same list.
func validateSourceRanges(svc *corev1.Service, oldRanges []string) field.ErrorList {
	var errs field.ErrorList
	isLB := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		// Upstream spells this path with a capital L; kept for fidelity.
		path := field.NewPath("spec", "LoadBalancerSourceRanges")
		if !isLB {
			errs = append(errs, field.Forbidden(path, mayOnlyLoadBalancer))
		}
		for i, value := range svc.Spec.LoadBalancerSourceRanges {
			// Space padding is tolerated: a leftover from the annotation days.
			errs = append(errs, validateLegacyCIDR(path.Index(i), strings.TrimSpace(value), oldRanges)...)
		}
		return errs
	}
	val, ok := svc.Annotations[corev1.AnnotationLoadBalancerSourceRangesKey]
	if !ok {
		return nil
	}
	path := field.NewPath("metadata", "annotations").Key(corev1.AnnotationLoadBalancerSourceRangesKey)
	if !isLB {
		errs = append(errs, field.Forbidden(path, mayOnlyLoadBalancer))
	}
	if val = strings.TrimSpace(val); val == "" {
		return errs
	}
	for _, value := range strings.Split(val, ",") {
		errs = append(errs, validateLegacyCIDR(path, strings.TrimSpace(value), nil)...)
	}
	return errs
}

// validateLoadBalancerClass checks spec.loadBalancerClass: a qualified name,
// only on LoadBalancer services, and fixed while the service stays one.
func validateLoadBalancerClass(old, svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "loadBalancerClass")
	isLB := func(s *corev1.Service) bool { return s.Spec.Type == corev1.ServiceTypeLoadBalancer }
	if old != nil && isLB(old) && isLB(svc) && !equalPtr(old.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) {
		errs = append(errs, field.Invalid(path, svc.Spec.LoadBalancerClass, "may not change once set"))
	}
	if svc.Spec.LoadBalancerClass == nil {
		return errs
	}
	if !isLB(svc) {
		return append(errs, field.Forbidden(path, mayOnlyLoadBalancer))
	}
	return append(errs, validateQualifiedName(*svc.Spec.LoadBalancerClass, path)...)
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// externallyAccessible is upstream's service.ExternallyAccessible: a Service
// reachable from outside the cluster, for which externalTrafficPolicy applies.
func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// needsHealthCheck is upstream's service.NeedsHealthCheck.
func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func validateExternalTrafficPolicy(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	policy, policyPath := svc.Spec.ExternalTrafficPolicy, specPath.Child("externalTrafficPolicy")
	switch {
	case !externallyAccessible(svc):
		if policy != "" {
			errs = append(errs, field.Invalid(policyPath, policy, "may only be set for externally-accessible services"))
		}
	case policy == "":
		errs = append(errs, field.Required(policyPath, ""))
	case !contains(supportedExternalPolicies, policy):
		errs = append(errs, field.NotSupported(policyPath, policy, supportedExternalPolicies))
	}
	hc, hcPath := svc.Spec.HealthCheckNodePort, specPath.Child("healthCheckNodePort")
	switch {
	case !needsHealthCheck(svc):
		if hc != 0 {
			errs = append(errs, field.Invalid(hcPath, hc, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
	case hc == 0:
		errs = append(errs, field.Required(hcPath, ""))
	default:
		errs = append(errs, validatePortNum(int(hc), hcPath)...)
	}
	return errs
}

func validateInternalTrafficPolicy(svc *corev1.Service) field.ErrorList {
	path := field.NewPath("spec", "internalTrafficPolicy")
	p := svc.Spec.InternalTrafficPolicy
	if p == nil {
		// Not required for ExternalName (or unknown types): upstream never
		// checked them and stored objects must stay valid.
		switch svc.Spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			return field.ErrorList{field.Required(path, "")}
		}
		return nil
	}
	if !contains(supportedInternalPolicies, *p) {
		return field.ErrorList{field.NotSupported(path, *p, supportedInternalPolicies)}
	}
	return nil
}

func validateTrafficDistribution(svc *corev1.Service) field.ErrorList {
	td := svc.Spec.TrafficDistribution
	if td == nil || contains(supportedTrafficDistributon, *td) {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("spec", "trafficDistribution"), *td, supportedTrafficDistributon)}
}
