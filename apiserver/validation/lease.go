package validation

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var validLeaseStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// ValidateLease validates a Lease.
func ValidateLease(lease *coordinationv1.Lease) field.ErrorList {
	errs := ValidateObjectMetaFor("Lease", &lease.ObjectMeta, true)
	return append(errs, validateLeaseSpec(&lease.Spec, field.NewPath("spec"))...)
}

// ValidateLeaseUpdate validates an update of a Lease.
func ValidateLeaseUpdate(newLease, oldLease *coordinationv1.Lease) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Lease", &newLease.ObjectMeta, &oldLease.ObjectMeta)
	return append(errs, validateLeaseSpec(&newLease.Spec, field.NewPath("spec"))...)
}

func validateLeaseSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseDurationSeconds"), d, "must be greater than 0"))
	}
	if n := spec.LeaseTransitions; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseTransitions"), n, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		errs = append(errs, validateLeaseStrategy(*spec.Strategy, fldPath.Child("strategy"))...)
	}
	if deref(spec.PreferredHolder) != "" && deref(spec.Strategy) == "" {
		errs = append(errs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// validateLeaseStrategy accepts Kubernetes' own strategies by bare name and
// anything else only as a domain-prefixed qualified name. Upstream reports
// it one level deeper ("spec.strategy.strategy"); kept for fidelity.
func validateLeaseStrategy(s coordinationv1.CoordinatedLeaseStrategy, fldPath *field.Path) field.ErrorList {
	path := fldPath.Child("strategy")
	if !strings.Contains(string(s), "/") {
		if !contains(validLeaseStrategies, s) {
			return field.ErrorList{field.NotSupported(path, s, validLeaseStrategies)}
		}
		return nil
	}
	return msgsToErrs(path, s, utilvalidation.IsQualifiedName(string(s)))
}
