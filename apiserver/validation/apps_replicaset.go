package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateReplicaSet validates a new ReplicaSet: metadata and spec.
func ValidateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := ValidateObjectMetaFor("ReplicaSet", &rs.ObjectMeta, true)
	return append(errs, validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))...)
}

// ValidateReplicaSetUpdate validates an update of a ReplicaSet's metadata
// and spec; the spec is checked as on create, and the selector may not
// change.
func ValidateReplicaSetUpdate(newRS, oldRS *appsv1.ReplicaSet) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("ReplicaSet", &newRS.ObjectMeta, &oldRS.ObjectMeta)
	errs = append(errs, validateReplicaSetSpec(&newRS.Spec, field.NewPath("spec"))...)
	return append(errs, validateSelectorUpdate(newRS.Spec.Selector, oldRS.Spec.Selector)...)
}

func validateReplicaSetSpec(spec *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	errs := validateOptionalNonNegative(spec.Replicas, fldPath.Child("replicas"))
	errs = append(errs, validateNonNegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	// Upstream's message says "deployment" for ReplicaSets too.
	sel, selErrs := validateWorkloadSelector(spec.Selector, "deployment", fldPath.Child("selector"))
	errs = append(errs, selErrs...)
	return append(errs, validateWorkloadTemplate(&spec.Template, sel, "ReplicaSet", fldPath.Child("template"))...)
}

// ValidateReplicaSetStatusUpdate validates a write to a ReplicaSet's
// status: counts ≥ 0 and within status.replicas, available ≤ ready, and
// well-formed conditions.
func ValidateReplicaSetStatusUpdate(newRS, oldRS *appsv1.ReplicaSet) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("ReplicaSet", &newRS.ObjectMeta, &oldRS.ObjectMeta)
	return append(errs, validateReplicaSetStatus(&newRS.Status, field.NewPath("status"))...)
}

func validateReplicaSetStatus(s *appsv1.ReplicaSetStatus, fldPath *field.Path) field.ErrorList {
	errs := validateNonNegative(s.ObservedGeneration, fldPath.Child("observedGeneration"))
	errs = append(errs, validateNonNegative(s.Replicas, fldPath.Child("replicas"))...)
	errs = append(errs, validateOptionalNonNegative(s.TerminatingReplicas, fldPath.Child("terminatingReplicas"))...)
	errs = append(errs, validateReplicaCounts(replicaCounts{
		replicas: s.Replicas, ready: s.ReadyReplicas, available: s.AvailableReplicas,
		others: map[string]int32{"fullyLabeledReplicas": s.FullyLabeledReplicas},
	}, fldPath)...)
	conds := make([]workloadCondition, len(s.Conditions))
	for i, c := range s.Conditions {
		conds[i] = workloadCondition{Type: string(c.Type), Status: c.Status}
	}
	return append(errs, validateConditions(conds, fldPath.Child("conditions"))...)
}
