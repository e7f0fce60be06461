package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"portal.dev/portal/apiserver/svcconfig"
)

// ServiceConfig is the cluster's Service configuration; see svcconfig.
type ServiceConfig = svcconfig.ServiceConfig

// maxClientIPAffinitySeconds is upstream's core.MaxClientIPServiceAffinitySeconds
// (one day); the versioned API does not export it.
const maxClientIPAffinitySeconds = 86400

var (
	supportedServiceTypes = []corev1.ServiceType{
		corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName,
		corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort,
	}
	supportedSessionAffinities  = []corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}
	supportedExternalPolicies   = []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}
	supportedInternalPolicies   = []corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}
	supportedTrafficDistributon = []string{
		corev1.ServiceTrafficDistributionPreferClose,
		corev1.ServiceTrafficDistributionPreferSameNode,
		corev1.ServiceTrafficDistributionPreferSameZone,
	}
)

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// ValidateService validates a Service on create. Like upstream's, it
// expects the registry's work done first: defaults applied (defaults.Service),
// clusterIP/clusterIPs synced and IP family fields initialised
// (defaults.ServiceIPFamilies), and cluster IPs and healthCheckNodePort
// allocated. Range checks on those allocations are the allocator's.
func ValidateService(svc *corev1.Service, cfg ServiceConfig) field.ErrorList {
	return validateService(svc, nil, cfg)
}

// validateService holds the rules shared by create and update; old, when
// set, only lets legacy IP/CIDR values already stored pass unchanged.
func validateService(svc, old *corev1.Service, cfg ServiceConfig) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := ValidateObjectMetaFor("Service", &svc.ObjectMeta, true)
	errs = append(errs, validateTopologyAnnotations(svc)...)
	errs = append(errs, validateServiceTypeShape(svc)...)
	errs = append(errs, validateServicePorts(svc)...)
	if svc.Spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabels(svc.Spec.Selector, specPath.Child("selector"))...)
	}
	errs = append(errs, validateSessionAffinity(&svc.Spec, specPath)...)
	errs = append(errs, ValidateServiceClusterIPs(svc, old)...)
	if !svcconfig.KeepsPreferDualStack(svc, old) {
		errs = append(errs, validateServiceFamiliesConfigured(svc, cfg)...)
	}
	errs = append(errs, validateExternalIPs(svc, old)...)
	errs = append(errs, validateServiceType(svc)...)
	errs = append(errs, validateLoadBalancerFields(svc, old)...)
	errs = append(errs, validateLoadBalancerClass(old, svc)...)
	errs = append(errs, validateExternalTrafficPolicy(svc)...)
	errs = append(errs, validateInternalTrafficPolicy(svc)...)
	errs = append(errs, validateTrafficDistribution(svc)...)
	return errs
}

func validateTopologyAnnotations(svc *corev1.Service) field.ErrorList {
	hints, hintsSet := svc.Annotations[corev1.DeprecatedAnnotationTopologyAwareHints]
	mode, modeSet := svc.Annotations[corev1.AnnotationTopologyMode]
	if !hintsSet || !modeSet || hints == mode {
		return nil
	}
	path := field.NewPath("metadata", "annotations").Key(corev1.AnnotationTopologyMode)
	msg := fmt.Sprintf("must match annotations[%s] when both are specified", corev1.DeprecatedAnnotationTopologyAwareHints)
	return field.ErrorList{field.Invalid(path, mode, msg)}
}

// isHeadless is upstream's definition: clusterIPs is exactly ["None"].
func isHeadless(svc *corev1.Service) bool {
	return svc != nil && len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

// validateServiceTypeShape checks what each type requires of ports, cluster
// IPs and externalName.
func validateServiceTypeShape(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	if len(svc.Spec.Ports) == 0 && !isHeadless(svc) && svc.Spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if isHeadless(svc) {
			msg := fmt.Sprintf("may not be set to 'None' for %s services", svc.Spec.Type)
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIPs[0], msg))
		}
	case corev1.ServiceTypeExternalName:
		errs = append(errs, validateExternalNameService(svc)...)
	}
	return errs
}

func validateExternalNameService(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	if len(svc.Spec.ClusterIPs) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
	}
	if len(svc.Spec.IPFamilies) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
	}
	if svc.Spec.IPFamilyPolicy != nil {
		errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
	}
	// The value is a CNAME target, which may be written fully qualified.
	cname := strings.TrimSuffix(svc.Spec.ExternalName, ".")
	if cname == "" {
		return append(errs, field.Required(specPath.Child("externalName"), ""))
	}
	return append(errs, validateDNS1123Subdomain(cname, specPath.Child("externalName"))...)
}

func validateServiceType(svc *corev1.Service) field.ErrorList {
	path := field.NewPath("spec", "type")
	switch {
	case svc.Spec.Type == "":
		return field.ErrorList{field.Required(path, "")}
	case !contains(supportedServiceTypes, svc.Spec.Type):
		return field.ErrorList{field.NotSupported(path, svc.Spec.Type, supportedServiceTypes)}
	}
	return nil
}

func validateSessionAffinity(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	path := specPath.Child("sessionAffinity")
	switch {
	case spec.SessionAffinity == "":
		errs = append(errs, field.Required(path, ""))
	case !contains(supportedSessionAffinities, spec.SessionAffinity):
		errs = append(errs, field.NotSupported(path, spec.SessionAffinity, supportedSessionAffinities))
	}
	cfgPath := specPath.Child("sessionAffinityConfig")
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityClientIP:
		errs = append(errs, validateClientIPAffinityConfig(spec.SessionAffinityConfig, cfgPath)...)
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(cfgPath, fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	}
	return errs
}

func validateClientIPAffinityConfig(cfg *corev1.SessionAffinityConfig, fldPath *field.Path) field.ErrorList {
	msg := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
	switch {
	case cfg == nil:
		return field.ErrorList{field.Required(fldPath, msg)}
	case cfg.ClientIP == nil:
		return field.ErrorList{field.Required(fldPath.Child("clientIP"), msg)}
	case cfg.ClientIP.TimeoutSeconds == nil:
		return field.ErrorList{field.Required(fldPath.Child("clientIP", "timeoutSeconds"), msg)}
	}
	timeout := cfg.ClientIP.TimeoutSeconds
	if *timeout <= 0 || *timeout > maxClientIPAffinitySeconds {
		path := fldPath.Child("clientIP", "timeoutSeconds")
		return field.ErrorList{field.Invalid(path, timeout, fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds))}
	}
	return nil
}

func validateExternalIPs(svc, old *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	var oldIPs []string
	if old != nil {
		oldIPs = old.Spec.ExternalIPs
	}
	path := field.NewPath("spec", "externalIPs")
	for i, ip := range svc.Spec.ExternalIPs {
		if ipErrs := validateLegacyIP(path.Index(i), ip, oldIPs); len(ipErrs) > 0 {
			errs = append(errs, ipErrs...)
			continue
		}
		errs = append(errs, ValidateNonSpecialIP(ip, path.Index(i))...)
	}
	return errs
}
