package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var supportedDaemonSetStrategies = []appsv1.DaemonSetUpdateStrategyType{appsv1.RollingUpdateDaemonSetStrategyType, appsv1.OnDeleteDaemonSetStrategyType}

// ValidateDaemonSet validates a new DaemonSet: metadata and spec.
func ValidateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := ValidateObjectMetaFor("DaemonSet", &ds.ObjectMeta, true)
	return append(errs, validateDaemonSetSpec(&ds.Spec, field.NewPath("spec"))...)
}

// ValidateDaemonSetUpdate validates an update of a DaemonSet's metadata and
// spec; the spec is checked as on create, and the selector may not change.
func ValidateDaemonSetUpdate(newDS, oldDS *appsv1.DaemonSet) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("DaemonSet", &newDS.ObjectMeta, &oldDS.ObjectMeta)
	errs = append(errs, validateDaemonSetSpec(&newDS.Spec, field.NewPath("spec"))...)
	return append(errs, validateSelectorUpdate(newDS.Spec.Selector, oldDS.Spec.Selector)...)
}

func validateDaemonSetSpec(spec *appsv1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	sel, errs := validateWorkloadSelector(spec.Selector, "daemonset", fldPath.Child("selector"))
	errs = append(errs, validateWorkloadTemplate(&spec.Template, sel, "DaemonSet", fldPath.Child("template"))...)
	errs = append(errs, validateNonNegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateOptionalNonNegative(spec.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	return append(errs, validateDaemonSetUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
}

func validateDaemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		return validateDaemonSetRollingUpdate(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(fldPath, s.Type, supportedDaemonSetStrategies)}
	}
	return nil
}

// validateDaemonSetRollingUpdate: both budgets are counts or percents up to
// 100%, and exactly one is non-zero. A node runs one daemon pod, so the
// rollout either replaces pods in place (maxUnavailable) or starts the new
// pod beside the old one (maxSurge), never both.
func validateDaemonSetRollingUpdate(ru *appsv1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	maxUnavailable, maxSurge := deref(ru.MaxUnavailable), deref(ru.MaxSurge)
	unavailablePath, surgePath := fldPath.Child("maxUnavailable"), fldPath.Child("maxSurge")
	errs := validateIntOrPercent(maxUnavailable, unavailablePath)
	errs = append(errs, validateIntOrPercent(maxSurge, surgePath)...)
	errs = append(errs, validateAtMost100Percent(maxUnavailable, unavailablePath)...)
	errs = append(errs, validateAtMost100Percent(maxSurge, surgePath)...)
	hasUnavailable, hasSurge := intOrPercentValue(maxUnavailable) != 0, intOrPercentValue(maxSurge) != 0
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, field.Invalid(surgePath, maxSurge, "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge:
		errs = append(errs, field.Required(unavailablePath, "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

// ValidateDaemonSetStatusUpdate validates a write to a DaemonSet's status:
// counts ≥ 0, ready and available within the desired number, a collision
// count that never decreases, and well-formed conditions.
func ValidateDaemonSetStatusUpdate(newDS, oldDS *appsv1.DaemonSet) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("DaemonSet", &newDS.ObjectMeta, &oldDS.ObjectMeta)
	errs = append(errs, validateDaemonSetStatus(&newDS.Status, field.NewPath("status"))...)
	return append(errs, validateCollisionCountUpdate(newDS.Status.CollisionCount, oldDS.Status.CollisionCount)...)
}

func validateDaemonSetStatus(s *appsv1.DaemonSetStatus, fldPath *field.Path) field.ErrorList {
	errs := validateNonNegative(s.ObservedGeneration, fldPath.Child("observedGeneration"))
	counts := []struct {
		name string
		v    int32
	}{
		{"currentNumberScheduled", s.CurrentNumberScheduled}, {"numberMisscheduled", s.NumberMisscheduled},
		{"desiredNumberScheduled", s.DesiredNumberScheduled}, {"numberReady", s.NumberReady},
		{"updatedNumberScheduled", s.UpdatedNumberScheduled}, {"numberAvailable", s.NumberAvailable},
		{"numberUnavailable", s.NumberUnavailable},
	}
	for _, c := range counts {
		errs = append(errs, validateNonNegative(c.v, fldPath.Child(c.name))...)
	}
	errs = append(errs, validateOptionalNonNegative(s.CollisionCount, fldPath.Child("collisionCount"))...)
	conds := make([]workloadCondition, len(s.Conditions))
	for i, c := range s.Conditions {
		conds[i] = workloadCondition{Type: string(c.Type), Status: c.Status}
	}
	return append(errs, validateConditions(conds, fldPath.Child("conditions"))...)
}
