package validation

import (
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var supportedDeploymentStrategies = []appsv1.DeploymentStrategyType{appsv1.RecreateDeploymentStrategyType, appsv1.RollingUpdateDeploymentStrategyType}

// ValidateDeployment validates a new Deployment: metadata and spec.
func ValidateDeployment(d *appsv1.Deployment) field.ErrorList {
	errs := ValidateObjectMetaFor("Deployment", &d.ObjectMeta, true)
	return append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
}

// ValidateDeploymentUpdate validates an update of a Deployment's metadata
// and spec; the spec is checked as on create, and the selector may not
// change.
func ValidateDeploymentUpdate(newD, oldD *appsv1.Deployment) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Deployment", &newD.ObjectMeta, &oldD.ObjectMeta)
	errs = append(errs, validateDeploymentSpec(&newD.Spec, field.NewPath("spec"))...)
	return append(errs, validateSelectorUpdate(newD.Spec.Selector, oldD.Spec.Selector)...)
}

func validateDeploymentSpec(spec *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	errs := validateOptionalNonNegative(spec.Replicas, fldPath.Child("replicas"))
	sel, selErrs := validateWorkloadSelector(spec.Selector, "deployment", fldPath.Child("selector"))
	errs = append(errs, selErrs...)
	// Upstream validates a Deployment's template as its ReplicaSets' one.
	errs = append(errs, validateWorkloadTemplate(&spec.Template, sel, "ReplicaSet", fldPath.Child("template"))...)
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, fldPath.Child("strategy"))...)
	errs = append(errs, validateNonNegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateOptionalNonNegative(spec.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	if pds := spec.ProgressDeadlineSeconds; pds != nil {
		path := fldPath.Child("progressDeadlineSeconds")
		errs = append(errs, validateNonNegative(*pds, path)...)
		// A deadline no longer than minReadySeconds would expire before any
		// pod could count as available.
		if *pds <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(path, *pds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"),
				fmt.Sprintf("may not be specified when strategy `type` is '%s'", appsv1.RecreateDeploymentStrategyType))}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateDeploymentRollingUpdate(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(fldPath, s.Type, supportedDeploymentStrategies)}
	}
	return nil
}

// validateDeploymentRollingUpdate: both budgets are counts or percents, and
// not both zero, or the rollout could never make progress.
func validateDeploymentRollingUpdate(ru *appsv1.RollingUpdateDeployment, fldPath *field.Path) field.ErrorList {
	maxUnavailable, maxSurge := deref(ru.MaxUnavailable), deref(ru.MaxSurge)
	unavailablePath := fldPath.Child("maxUnavailable")
	errs := validateIntOrPercent(maxUnavailable, unavailablePath)
	errs = append(errs, validateIntOrPercent(maxSurge, fldPath.Child("maxSurge"))...)
	if intOrPercentValue(maxUnavailable) == 0 && intOrPercentValue(maxSurge) == 0 {
		errs = append(errs, field.Invalid(unavailablePath, maxUnavailable, "may not be 0 when `maxSurge` is 0"))
	}
	return append(errs, validateAtMost100Percent(maxUnavailable, unavailablePath)...)
}

// ValidateDeploymentStatusUpdate validates a write to a Deployment's
// status: counts ≥ 0 and within status.replicas, available ≤ ready, a
// collision count that never decreases, and well-formed conditions.
func ValidateDeploymentStatusUpdate(newD, oldD *appsv1.Deployment) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Deployment", &newD.ObjectMeta, &oldD.ObjectMeta)
	errs = append(errs, validateDeploymentStatus(&newD.Status, field.NewPath("status"))...)
	return append(errs, validateCollisionCountUpdate(newD.Status.CollisionCount, oldD.Status.CollisionCount)...)
}

func validateDeploymentStatus(s *appsv1.DeploymentStatus, fldPath *field.Path) field.ErrorList {
	errs := validateNonNegative(s.ObservedGeneration, fldPath.Child("observedGeneration"))
	errs = append(errs, validateNonNegative(s.Replicas, fldPath.Child("replicas"))...)
	errs = append(errs, validateNonNegative(s.UnavailableReplicas, fldPath.Child("unavailableReplicas"))...)
	errs = append(errs, validateOptionalNonNegative(s.TerminatingReplicas, fldPath.Child("terminatingReplicas"))...)
	errs = append(errs, validateOptionalNonNegative(s.CollisionCount, fldPath.Child("collisionCount"))...)
	errs = append(errs, validateReplicaCounts(replicaCounts{
		replicas: s.Replicas, ready: s.ReadyReplicas, available: s.AvailableReplicas,
		others: map[string]int32{"updatedReplicas": s.UpdatedReplicas},
	}, fldPath)...)
	conds := make([]workloadCondition, len(s.Conditions))
	for i, c := range s.Conditions {
		conds[i] = workloadCondition{Type: string(c.Type), Status: c.Status}
	}
	return append(errs, validateConditions(conds, fldPath.Child("conditions"))...)
}

// replicaCounts are the status counts of a Deployment or ReplicaSet that
// are parts of status.replicas.
type replicaCounts struct {
	replicas, ready, available int32
	// others are further counts bounded by replicas, by field name.
	others map[string]int32
}

// validateReplicaCounts: each count ≥ 0 and ≤ replicas, and available ≤
// ready, since a pod is available only once it has been ready for
// minReadySeconds.
func validateReplicaCounts(c replicaCounts, fldPath *field.Path) field.ErrorList {
	counts := map[string]int32{"readyReplicas": c.ready, "availableReplicas": c.available}
	for name, v := range c.others {
		counts[name] = v
	}
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		errs = append(errs, validateNonNegative(counts[name], fldPath.Child(name))...)
		// A negative replicas has its own error; comparing with it would
		// only add noise.
		if c.replicas >= 0 {
			errs = append(errs, validateNotMoreThan(counts[name], c.replicas, "status.replicas", fldPath.Child(name))...)
		}
	}
	return append(errs, validateNotMoreThan(c.available, c.ready, "readyReplicas", fldPath.Child("availableReplicas"))...)
}
