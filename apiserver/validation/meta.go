package validation

import (
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NameFunc checks an object name (prefix: the name is a generateName
// prefix, so a trailing dash is allowed) and returns the reasons it is
// invalid.
type NameFunc = apimachineryvalidation.ValidateNameFunc

// nameRules maps each kind Portal serves to upstream's name rule. Services
// are DNS-1035 labels (they become DNS names and environment variables),
// Namespaces DNS-1123 labels, everything else DNS-1123 subdomains.
var nameRules = map[string]NameFunc{
	"Service":        apimachineryvalidation.NameIsDNS1035Label,
	"Namespace":      apimachineryvalidation.ValidateNamespaceName,
	"ServiceAccount": apimachineryvalidation.ValidateServiceAccountName,
	"Pod":            apimachineryvalidation.NameIsDNSSubdomain,
	"ConfigMap":      apimachineryvalidation.NameIsDNSSubdomain,
	"Secret":         apimachineryvalidation.NameIsDNSSubdomain,
	"Endpoints":      apimachineryvalidation.NameIsDNSSubdomain,
	"EndpointSlice":  apimachineryvalidation.NameIsDNSSubdomain,
	"Lease":          apimachineryvalidation.NameIsDNSSubdomain,
	"Ingress":        apimachineryvalidation.NameIsDNSSubdomain,
	"IngressClass":   apimachineryvalidation.NameIsDNSSubdomain,
	"Event":          apimachineryvalidation.NameIsDNSSubdomain,
	"Node":           apimachineryvalidation.NameIsDNSSubdomain,
	"StatefulSet":    ValidateStatefulSetName,
}

// NameRule returns upstream's name rule for kind; unknown kinds get the
// DNS-1123 subdomain rule, which is what most upstream kinds use.
func NameRule(kind string) NameFunc {
	if fn, ok := nameRules[kind]; ok {
		return fn
	}
	return apimachineryvalidation.NameIsDNSSubdomain
}

// standardFinalizers are the finalizer names allowed without a domain
// prefix (upstream's helper.IsStandardFinalizerName).
var standardFinalizers = map[string]bool{
	"kubernetes":                     true,
	metav1.FinalizerOrphanDependents: true,
	metav1.FinalizerDeleteDependents: true,
}

// usesKubeFinalizerRule reports whether upstream validates kind's metadata
// through pkg/apis/core/validation (which also restricts unprefixed
// finalizer names) rather than through apimachinery directly, as the
// coordination group does for Lease.
func usesKubeFinalizerRule(kind string) bool {
	return kind != "Lease"
}

// validateKubeFinalizerNames rejects unprefixed finalizers that are not one
// of the standard names.
func validateKubeFinalizerNames(finalizers []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		errs = append(errs, validateKubeFinalizerName(f, fldPath.Index(i))...)
	}
	return errs
}

func validateKubeFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	if strings.Contains(name, "/") || standardFinalizers[name] {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified")}
}

// ValidateObjectMetaFor validates the metadata of a new object of kind:
// name (or generateName) per the kind's name rule, namespace presence,
// labels, annotations, owner references and finalizers. namespaced says
// whether the kind is namespace-scoped (Namespace, Node and IngressClass are
// not).
func ValidateObjectMetaFor(kind string, meta *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	fldPath := field.NewPath("metadata")
	errs := apimachineryvalidation.ValidateObjectMeta(meta, namespaced, NameRule(kind), fldPath)
	if usesKubeFinalizerRule(kind) {
		errs = append(errs, validateKubeFinalizerNames(meta.Finalizers, fldPath.Child("finalizers"))...)
	}
	return errs
}

// ValidateObjectMetaUpdateFor validates metadata on update: name, namespace,
// uid and creationTimestamp are immutable, resourceVersion is required,
// generation may not decrease, and finalizers may not be added once the
// object is being deleted.
func ValidateObjectMetaUpdateFor(kind string, newMeta, oldMeta *metav1.ObjectMeta) field.ErrorList {
	fldPath := field.NewPath("metadata")
	errs := apimachineryvalidation.ValidateObjectMetaUpdate(newMeta, oldMeta, fldPath)
	if usesKubeFinalizerRule(kind) {
		errs = append(errs, validateKubeFinalizerNames(newMeta.Finalizers, fldPath.Child("finalizers"))...)
	}
	return errs
}
