package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

var supportedIPModes = []corev1.LoadBalancerIPMode{corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeVIP}

// ValidateServiceUpdate validates an update of a Service's spec and
// metadata. Cluster IPs and IP families may gain or lose a secondary entry
// (dual-stack upgrade or downgrade, which needs ipFamilyPolicy SingleStack)
// but the primary is fixed, except when the type changes to or from
// ExternalName; loadBalancerClass and healthCheckNodePort are fixed while
// they apply.
func ValidateServiceUpdate(newSvc, oldSvc *corev1.Service, cfg ServiceConfig) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Service", &newSvc.ObjectMeta, &oldSvc.ObjectMeta)
	errs = append(errs, validateClusterIPsUpdate(oldSvc, newSvc)...)
	errs = append(errs, validateIPFamiliesUpdate(oldSvc, newSvc)...)
	if needsHealthCheck(oldSvc) && needsHealthCheck(newSvc) && oldSvc.Spec.HealthCheckNodePort != newSvc.Spec.HealthCheckNodePort {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "healthCheckNodePort"), "field is immutable"))
	}
	// validateService also checks loadBalancerClass against the old object.
	return append(errs, validateService(newSvc, oldSvc, cfg)...)
}

// validateClusterIPsUpdate lets clusterIPs gain or drop its secondary entry
// but never change what is already there.
func validateClusterIPsUpdate(oldSvc, svc *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || oldSvc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if isHeadless(oldSvc) && isHeadless(svc) {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "clusterIPs")
	oldIPs, newIPs := oldSvc.Spec.ClusterIPs, svc.Spec.ClusterIPs
	switch {
	case len(oldIPs) == len(newIPs):
		for i := range oldIPs {
			if oldIPs[i] != newIPs[i] {
				errs = append(errs, field.Invalid(path.Index(i), newIPs, "may not change once set"))
			}
		}
	case len(oldIPs) > len(newIPs):
		if len(newIPs) == 0 {
			errs = append(errs, field.Invalid(path.Index(0), newIPs, "primary clusterIP can not be unset"))
		}
		if len(newIPs) > 0 && newIPs[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(path.Index(0), newIPs, "may not change once set"))
		}
		if len(newIPs) == 1 && !isSingleStack(svc) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary clusterIP"))
		}
	default:
		if len(oldIPs) > 0 && newIPs[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(path.Index(0), newIPs, "may not change once set"))
		}
	}
	return errs
}

func isSingleStack(svc *corev1.Service) bool {
	return svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack
}

// validateIPFamiliesUpdate is validateClusterIPsUpdate for ipFamilies;
// headless services may change families freely. The bad values reported
// follow upstream, which in places names clusterIPs here.
func validateIPFamiliesUpdate(oldSvc, svc *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || oldSvc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if isHeadless(oldSvc) || isHeadless(svc) {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "ipFamilies").Index(0)
	oldFams, newFams := oldSvc.Spec.IPFamilies, svc.Spec.IPFamilies
	switch {
	case len(oldFams) == len(newFams):
		for i := range oldFams {
			if oldFams[i] != newFams[i] {
				errs = append(errs, field.Invalid(path, newFams, "may not change once set"))
			}
		}
	case len(oldFams) > len(newFams):
		if len(svc.Spec.ClusterIPs) == 0 {
			errs = append(errs, field.Invalid(path, newFams, "primary ipFamily can not be unset"))
		}
		if len(newFams) > 0 && newFams[0] != oldFams[0] {
			errs = append(errs, field.Invalid(path, svc.Spec.ClusterIPs, "may not change once set"))
		}
		if len(newFams) == 1 && !isSingleStack(svc) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilyPolicy"), svc.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	default:
		if len(oldFams) > 0 && newFams[0] != oldFams[0] {
			errs = append(errs, field.Invalid(path, svc.Spec.ClusterIPs, "may not change once set"))
		}
	}
	return errs
}

// ValidateServiceStatusUpdate validates an update through the status
// subresource: metadata rules and status.loadBalancer.
func ValidateServiceStatusUpdate(newSvc, oldSvc *corev1.Service) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Service", &newSvc.ObjectMeta, &oldSvc.ObjectMeta)
	return append(errs, validateLoadBalancerStatus(&newSvc.Status.LoadBalancer, &oldSvc.Status.LoadBalancer, &newSvc.Spec)...)
}

func validateLoadBalancerStatus(status, oldStatus *corev1.LoadBalancerStatus, spec *corev1.ServiceSpec) field.ErrorList {
	ingressPath := field.NewPath("status", "loadBalancer", "ingress")
	if spec.Type != corev1.ServiceTypeLoadBalancer && len(status.Ingress) != 0 {
		return field.ErrorList{field.Forbidden(ingressPath, "may only be used when `spec.type` is 'LoadBalancer'")}
	}
	var oldIPs []string
	for _, ing := range oldStatus.Ingress {
		if ing.IP != "" {
			oldIPs = append(oldIPs, ing.IP)
		}
	}
	var errs field.ErrorList
	for i := range status.Ingress {
		errs = append(errs, validateLoadBalancerIngress(&status.Ingress[i], oldIPs, ingressPath.Index(i))...)
	}
	return errs
}

func validateLoadBalancerIngress(ing *corev1.LoadBalancerIngress, oldIPs []string, idxPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ing.IP != "" {
		errs = append(errs, validateLegacyIP(idxPath.Child("ip"), ing.IP, oldIPs)...)
	}
	switch {
	case ing.IPMode == nil && ing.IP != "":
		errs = append(errs, field.Required(idxPath.Child("ipMode"), "must be specified when `ip` is set"))
	case ing.IPMode != nil && ing.IP == "":
		errs = append(errs, field.Forbidden(idxPath.Child("ipMode"), "may not be specified when `ip` is not set"))
	case ing.IPMode != nil && !contains(supportedIPModes, *ing.IPMode):
		errs = append(errs, field.NotSupported(idxPath.Child("ipMode"), ing.IPMode, supportedIPModes))
	}
	if ing.Hostname != "" {
		errs = append(errs, validateDNS1123Subdomain(ing.Hostname, idxPath.Child("hostname"))...)
		if netutils.ParseIPSloppy(ing.Hostname) != nil {
			errs = append(errs, field.Invalid(idxPath.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
		}
	}
	// ports[] is not validated: upstream documents a format for ports[].error
	// but has never enforced it on built-in Services.
	return errs
}
