package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

const (
	annotationIngressClass       = "kubernetes.io/ingress.class"
	maxLenIngressClassController = 250
)

var (
	supportedPathTypes = []networkingv1.PathType{
		networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypePrefix,
	}
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
	supportedParamScopes = []string{
		networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace,
	}
)

// ingressOptions relax rules for updates of objects stored before the rules
// tightened, as upstream's IngressValidationOptions do.
type ingressOptions struct {
	allowInvalidSecretName       bool
	allowInvalidWildcardHostRule bool
	allowDNSLabelServiceName     bool
}

// ValidateIngress validates a new Ingress: rules or a default backend,
// hosts, paths, backends, TLS, and agreement between ingressClassName and
// the kubernetes.io/ingress.class annotation.
func ValidateIngress(ing *networkingv1.Ingress) field.ErrorList {
	errs := validateIngress(ing, ingressOptions{})
	if ann, ok := ing.Annotations[annotationIngressClass]; ok && ing.Spec.IngressClassName != nil && ann != *ing.Spec.IngressClassName {
		// Upstream's path, without "metadata.".
		errs = append(errs, field.Invalid(field.NewPath("annotations").Child(annotationIngressClass), ann, "must match `ingressClassName` when both are specified"))
	}
	return errs
}

// ValidateIngressUpdate validates an update of an Ingress. Stored values
// that no longer pass (secret names, rules under wildcard hosts, service
// names that are DNS-1123 but not DNS-1035 labels) stay accepted.
func ValidateIngressUpdate(newIng, oldIng *networkingv1.Ingress) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Ingress", &newIng.ObjectMeta, &oldIng.ObjectMeta)
	opts := ingressOptions{
		allowInvalidSecretName:       hasInvalidSecretName(oldIng),
		allowInvalidWildcardHostRule: hasInvalidWildcardRule(oldIng),
		allowDNSLabelServiceName:     hasDNSLabelServiceName(oldIng),
	}
	return append(errs, validateIngress(newIng, opts)...)
}

func validateIngress(ing *networkingv1.Ingress, opts ingressOptions) field.ErrorList {
	errs := ValidateObjectMetaFor("Ingress", &ing.ObjectMeta, true)
	return append(errs, validateIngressSpec(&ing.Spec, field.NewPath("spec"), opts)...)
}

func validateIngressSpec(spec *networkingv1.IngressSpec, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(fldPath, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(spec.DefaultBackend, fldPath.Child("defaultBackend"), opts)...)
	}
	for i := range spec.Rules {
		errs = append(errs, validateIngressRule(&spec.Rules[i], fldPath.Child("rules").Index(i), opts)...)
	}
	for i := range spec.TLS {
		errs = append(errs, validateIngressTLS(&spec.TLS[i], fldPath.Child("tls").Index(i), opts)...)
	}
	if spec.IngressClassName != nil {
		name := *spec.IngressClassName
		errs = append(errs, msgsToErrs(fldPath.Child("ingressClassName"), name, apivalidation.NameIsDNSSubdomain(name, false))...)
	}
	return errs
}

// validateHost accepts a DNS subdomain or, when it contains '*', a
// wildcard subdomain ("*.example.com"), and reports which it was.
func validateHost(host string, fldPath *field.Path) (field.ErrorList, bool) {
	if strings.Contains(host, "*") {
		return msgsToErrs(fldPath, host, utilvalidation.IsWildcardDNS1123Subdomain(host)), true
	}
	return msgsToErrs(fldPath, host, utilvalidation.IsDNS1123Subdomain(host)), false
}

func validateIngressRule(rule *networkingv1.IngressRule, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	wildcard := false
	if rule.Host != "" {
		hostPath := fldPath.Child("host")
		if netutils.ParseIPSloppy(rule.Host) != nil {
			errs = append(errs, field.Invalid(hostPath, rule.Host, "must be a DNS name, not an IP address"))
		}
		hostErrs, isWildcard := validateHost(rule.Host, hostPath)
		errs, wildcard = append(errs, hostErrs...), isWildcard
	}
	if (!wildcard || !opts.allowInvalidWildcardHostRule) && rule.HTTP != nil {
		errs = append(errs, validateHTTPRule(rule.HTTP, fldPath.Child("http"), opts)...)
	}
	return errs
}

func validateHTTPRule(http *networkingv1.HTTPIngressRuleValue, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	if len(http.Paths) == 0 {
		errs = append(errs, field.Required(fldPath.Child("paths"), ""))
	}
	for i := range http.Paths {
		errs = append(errs, validateHTTPPath(&http.Paths[i], fldPath.Child("paths").Index(i), opts)...)
	}
	return errs
}

func validateHTTPPath(p *networkingv1.HTTPIngressPath, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	if p.PathType == nil {
		return field.ErrorList{field.Required(fldPath.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	pathPath := fldPath.Child("path")
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
		errs = append(errs, validatePathSegments(p.Path, pathPath)...)
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("pathType"), *p.PathType, supportedPathTypes))
	}
	return append(errs, validateIngressBackend(&p.Backend, fldPath.Child("backend"), opts)...)
}

// validatePathSegments rejects paths that proxies normalise differently
// ("/a/../b", "%2f"), which would make matching ambiguous.
func validatePathSegments(path string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, seq := range invalidPathSequences {
		if strings.Contains(path, seq) {
			errs = append(errs, field.Invalid(fldPath, path, fmt.Sprintf("must not contain '%s'", seq)))
		}
	}
	for _, suffix := range invalidPathSuffixes {
		if strings.HasSuffix(path, suffix) {
			errs = append(errs, field.Invalid(fldPath, path, fmt.Sprintf("cannot end with '%s'", suffix)))
		}
	}
	return errs
}

func validateIngressBackend(b *networkingv1.IngressBackend, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(fldPath, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		return validateTypedLocalObjectReference(b.Resource, fldPath.Child("resource"))
	case b.Service != nil:
		return validateServiceBackend(b.Service, fldPath, opts)
	}
	return field.ErrorList{field.Invalid(fldPath, "", "resource or service backend is required")}
}

func validateServiceBackend(svc *networkingv1.IngressServiceBackend, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	namePath := fldPath.Child("service", "name")
	if svc.Name == "" {
		errs = append(errs, field.Required(namePath, ""))
	} else {
		nameRule := apivalidation.NameIsDNS1035Label
		if opts.allowDNSLabelServiceName {
			nameRule = apivalidation.NameIsDNSLabel
		}
		errs = append(errs, msgsToErrs(namePath, svc.Name, nameRule(svc.Name, false))...)
	}
	hasName, hasNumber := svc.Port.Name != "", svc.Port.Number != 0
	switch {
	case hasName && hasNumber:
		errs = append(errs, field.Invalid(fldPath, "", "cannot set both port name & port number"))
	case hasName:
		errs = append(errs, msgsToErrs(fldPath.Child("service", "port", "name"), svc.Port.Name, utilvalidation.IsValidPortName(svc.Port.Name))...)
	case hasNumber:
		errs = append(errs, msgsToErrs(fldPath.Child("service", "port", "number"), svc.Port.Number, utilvalidation.IsValidPortNum(int(svc.Port.Number)))...)
	default:
		errs = append(errs, field.Required(fldPath, "port name or number is required"))
	}
	return errs
}

func validateTypedLocalObjectReference(ref *corev1.TypedLocalObjectReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIGroup != nil {
		errs = append(errs, validateDNS1123Subdomain(*ref.APIGroup, fldPath.Child("apiGroup"))...)
	}
	errs = append(errs, validatePathSegmentField(ref.Kind, fldPath.Child("kind"))...)
	return append(errs, validatePathSegmentField(ref.Name, fldPath.Child("name"))...)
}

func validatePathSegmentField(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return msgsToErrs(fldPath, value, content.IsPathSegmentName(value))
}

func validateIngressTLS(tls *networkingv1.IngressTLS, fldPath *field.Path, opts ingressOptions) field.ErrorList {
	var errs field.ErrorList
	for i, host := range tls.Hosts {
		hostErrs, _ := validateHost(host, fldPath.Child("hosts").Index(i))
		errs = append(errs, hostErrs...)
	}
	if !opts.allowInvalidSecretName && tls.SecretName != "" {
		errs = append(errs, msgsToErrs(fldPath.Child("secretName"), tls.SecretName, apivalidation.NameIsDNSSubdomain(tls.SecretName, false))...)
	}
	return errs
}

func hasInvalidSecretName(old *networkingv1.Ingress) bool {
	for _, tls := range old.Spec.TLS {
		if tls.SecretName != "" && len(apivalidation.NameIsDNSSubdomain(tls.SecretName, false)) > 0 {
			return true
		}
	}
	return false
}

func hasInvalidWildcardRule(old *networkingv1.Ingress) bool {
	for _, rule := range old.Spec.Rules {
		if strings.Contains(rule.Host, "*") && rule.HTTP != nil && len(validateHTTPRule(rule.HTTP, nil, ingressOptions{})) > 0 {
			return true
		}
	}
	return false
}

// hasDNSLabelServiceName reports whether the old Ingress names a Service
// that is a DNS-1123 label but not a DNS-1035 one (e.g. "1st-svc"), which
// upstream once accepted.
func hasDNSLabelServiceName(old *networkingv1.Ingress) bool {
	relaxedOnly := func(b *networkingv1.IngressBackend) bool {
		if b == nil || b.Service == nil {
			return false
		}
		n := b.Service.Name
		return len(apivalidation.NameIsDNSLabel(n, false)) == 0 && len(apivalidation.NameIsDNS1035Label(n, false)) > 0
	}
	if relaxedOnly(old.Spec.DefaultBackend) {
		return true
	}
	for _, rule := range old.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for i := range rule.HTTP.Paths {
			if relaxedOnly(&rule.HTTP.Paths[i].Backend) {
				return true
			}
		}
	}
	return false
}

// ValidateIngressStatusUpdate validates an update through the status
// subresource.
func ValidateIngressStatusUpdate(newIng, oldIng *networkingv1.Ingress) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Ingress", &newIng.ObjectMeta, &oldIng.ObjectMeta)
	var oldIPs []string
	for _, ing := range oldIng.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			oldIPs = append(oldIPs, ing.IP)
		}
	}
	path := field.NewPath("status", "loadBalancer", "ingress")
	for i, ing := range newIng.Status.LoadBalancer.Ingress {
		idxPath := path.Index(i)
		if ing.IP != "" {
			errs = append(errs, validateLegacyIP(idxPath.Child("ip"), ing.IP, oldIPs)...)
		}
		if ing.Hostname != "" {
			errs = append(errs, validateDNS1123Subdomain(ing.Hostname, idxPath.Child("hostname"))...)
			if netutils.ParseIPSloppy(ing.Hostname) != nil {
				errs = append(errs, field.Invalid(idxPath.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}

// ValidateIngressClass validates an IngressClass: a domain-prefixed
// controller name of at most 250 bytes and a well-formed parameters
// reference.
func ValidateIngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	errs := ValidateObjectMetaFor("IngressClass", &ic.ObjectMeta, false)
	specPath := field.NewPath("spec")
	ctrlPath := specPath.Child("controller")
	switch c := ic.Spec.Controller; {
	case c == "":
		errs = append(errs, field.Required(ctrlPath, ""))
	default:
		if len(c) > maxLenIngressClassController {
			errs = append(errs, field.TooLong(ctrlPath, "", maxLenIngressClassController))
		}
		errs = append(errs, utilvalidation.IsDomainPrefixedPath(ctrlPath, c)...)
	}
	return append(errs, validateIngressClassParameters(ic.Spec.Parameters, specPath.Child("parameters"))...)
}

// ValidateIngressClassUpdate validates an update of an IngressClass; the
// controller is immutable.
func ValidateIngressClassUpdate(newIC, oldIC *networkingv1.IngressClass) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("IngressClass", &newIC.ObjectMeta, &oldIC.ObjectMeta)
	errs = append(errs, apivalidation.ValidateImmutableField(newIC.Spec.Controller, oldIC.Spec.Controller, field.NewPath("spec", "controller"))...)
	return append(errs, ValidateIngressClass(newIC)...)
}

func validateIngressClassParameters(p *networkingv1.IngressClassParametersReference, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	if p.APIGroup != nil {
		errs = append(errs, validateDNS1123Subdomain(*p.APIGroup, fldPath.Child("apiGroup"))...)
	}
	errs = append(errs, validatePathSegmentField(p.Kind, fldPath.Child("kind"))...)
	errs = append(errs, validatePathSegmentField(p.Name, fldPath.Child("name"))...)
	if p.Scope == nil {
		return append(errs, field.Required(fldPath.Child("scope"), ""))
	}
	nsPath := fldPath.Child("namespace")
	switch *p.Scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if p.Namespace == nil {
			errs = append(errs, field.Required(nsPath, "`parameters.scope` is set to 'Namespace'"))
		} else {
			errs = append(errs, msgsToErrs(nsPath, *p.Namespace, apivalidation.ValidateNamespaceName(*p.Namespace, false))...)
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if p.Namespace != nil {
			errs = append(errs, field.Forbidden(nsPath, "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("scope"), *p.Scope, supportedParamScopes))
	}
	return errs
}
