package validation

import (
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// revisionHashLength is the longest hash the StatefulSet controller appends
// to the set's name in its pods' controller-revision-hash label.
const revisionHashLength = 10

// maxStatefulSetNameLength leaves room in a label value (63 characters) for
// "-" and the revision hash.
const maxStatefulSetNameLength = validation.LabelValueMaxLength - 1 - revisionHashLength

// ValidateStatefulSetName checks a StatefulSet name (prefix: a generateName
// prefix). It is a DNS-1123 label, as upstream, because its pods' names
// (NAME-ORDINAL) are their hostnames; and it must be short enough that the
// controller-revision-hash label of its pods, the name followed by "-" and
// a hash, is a valid label value. Otherwise every pod the controller
// creates would fail validation.
func ValidateStatefulSetName(name string, prefix bool) []string {
	msgs := apimachineryvalidation.NameIsDNSLabel(name, prefix)
	if !prefix && len(name) > maxStatefulSetNameLength {
		msgs = append(msgs, fmt.Sprintf("must be no more than %d characters, so that its pods' %s label (the name, \"-\" and a %d-character hash) is a valid label value",
			maxStatefulSetNameLength, appsv1.ControllerRevisionHashLabelKey, revisionHashLength))
	}
	return msgs
}

var (
	supportedPodManagementPolicies = []appsv1.PodManagementPolicyType{appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement}
	supportedPVCRetentionPolicies  = []appsv1.PersistentVolumeClaimRetentionPolicyType{appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
)

// ValidateStatefulSet validates a new StatefulSet: metadata (with the name
// rule above) and spec.
func ValidateStatefulSet(sts *appsv1.StatefulSet) field.ErrorList {
	errs := ValidateObjectMetaFor("StatefulSet", &sts.ObjectMeta, true)
	return append(errs, validateStatefulSetSpec(&sts.Spec, field.NewPath("spec"))...)
}

func validateStatefulSetSpec(spec *appsv1.StatefulSetSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := spec.PodManagementPolicy; p == "" {
		errs = append(errs, field.Required(fldPath.Child("podManagementPolicy"), ""))
	} else if !contains(supportedPodManagementPolicies, p) {
		errs = append(errs, field.Invalid(fldPath.Child("podManagementPolicy"), p, fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	errs = append(errs, validateStatefulSetUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	errs = append(errs, validatePVCRetentionPolicy(spec.PersistentVolumeClaimRetentionPolicy, fldPath.Child("persistentVolumeClaimRetentionPolicy"))...)
	errs = append(errs, validateOptionalNonNegative(spec.Replicas, fldPath.Child("replicas"))...)
	errs = append(errs, validateNonNegative(spec.MinReadySeconds, fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateOptionalNonNegative(spec.RevisionHistoryLimit, fldPath.Child("revisionHistoryLimit"))...)
	if spec.Ordinals != nil {
		errs = append(errs, validateNonNegative(spec.Ordinals.Start, fldPath.Child("ordinals", "start"))...)
	}
	if spec.ServiceName != "" {
		errs = append(errs, validateDNS1123Label(spec.ServiceName, fldPath.Child("serviceName"))...)
	}
	if len(spec.VolumeClaimTemplates) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("volumeClaimTemplates"),
			"not supported: Portal has no storage to provision persistent volume claims from; use volumes in the pod template instead"))
	}
	sel, selErrs := validateWorkloadSelector(spec.Selector, "statefulset", fldPath.Child("selector"))
	errs = append(errs, selErrs...)
	return append(errs, validateWorkloadTemplate(&spec.Template, sel, "StatefulSet", fldPath.Child("template"))...)
}

func validateStatefulSetUpdateStrategy(s *appsv1.StatefulSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Invalid(fldPath.Child("rollingUpdate"), s.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType))}
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return validateStatefulSetRollingUpdate(s.RollingUpdate, fldPath.Child("rollingUpdate"))
		}
	default:
		return field.ErrorList{field.Invalid(fldPath, s,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType))}
	}
	return nil
}

// validateStatefulSetRollingUpdate: partition ≥ 0; maxUnavailable, when
// set, is a positive count or a percent from 1% to 100%.
func validateStatefulSetRollingUpdate(ru *appsv1.RollingUpdateStatefulSetStrategy, fldPath *field.Path) field.ErrorList {
	errs := validateOptionalNonNegative(ru.Partition, fldPath.Child("partition"))
	if ru.MaxUnavailable == nil {
		return errs
	}
	maxPath := fldPath.Child("maxUnavailable")
	errs = append(errs, validateIntOrPercent(*ru.MaxUnavailable, maxPath)...)
	if intOrPercentValue(*ru.MaxUnavailable) == 0 {
		errs = append(errs, field.Invalid(maxPath, *ru.MaxUnavailable, "cannot be 0"))
	}
	return append(errs, validateAtMost100Percent(*ru.MaxUnavailable, maxPath)...)
}

func validatePVCRetentionPolicy(p *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	check := func(v appsv1.PersistentVolumeClaimRetentionPolicyType, child string) {
		if !contains(supportedPVCRetentionPolicies, v) {
			errs = append(errs, field.NotSupported(fldPath.Child(child), v, supportedPVCRetentionPolicies))
		}
	}
	check(p.WhenDeleted, "whenDeleted")
	check(p.WhenScaled, "whenScaled")
	return errs
}

// ValidateStatefulSetUpdate validates an update of a StatefulSet's metadata
// and spec. Only replicas, ordinals, template, updateStrategy,
// persistentVolumeClaimRetentionPolicy, minReadySeconds and
// revisionHistoryLimit may change: the others (serviceName,
// podManagementPolicy, volumeClaimTemplates) define the identity of pods
// that already exist. The selector gets its own "field is immutable" error,
// as for the other workloads, rather than only the general one on spec.
func ValidateStatefulSetUpdate(newSts, oldSts *appsv1.StatefulSet) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("StatefulSet", &newSts.ObjectMeta, &oldSts.ObjectMeta)
	errs = append(errs, validateStatefulSetSpec(&newSts.Spec, field.NewPath("spec"))...)
	errs = append(errs, validateSelectorUpdate(newSts.Spec.Selector, oldSts.Spec.Selector)...)
	fixed := newSts.Spec.DeepCopy()
	fixed.Replicas = oldSts.Spec.Replicas
	fixed.Ordinals = oldSts.Spec.Ordinals
	fixed.Template = oldSts.Spec.Template
	fixed.UpdateStrategy = oldSts.Spec.UpdateStrategy
	fixed.PersistentVolumeClaimRetentionPolicy = oldSts.Spec.PersistentVolumeClaimRetentionPolicy
	fixed.MinReadySeconds = oldSts.Spec.MinReadySeconds
	fixed.RevisionHistoryLimit = oldSts.Spec.RevisionHistoryLimit
	fixed.Selector = oldSts.Spec.Selector
	if changed := changedFields(fixed, &oldSts.Spec); len(changed) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy', 'minReadySeconds' and 'revisionHistoryLimit' are forbidden (changed: %s)",
			strings.Join(changed, ", "))))
	}
	return errs
}

// changedFields returns the JSON names of the fields of two specs that
// differ, so that the error says which change was refused.
func changedFields(newSpec, oldSpec *appsv1.StatefulSetSpec) []string {
	var changed []string
	nv, ov, t := reflect.ValueOf(newSpec).Elem(), reflect.ValueOf(oldSpec).Elem(), reflect.TypeOf(*newSpec)
	for i := range t.NumField() {
		if !apiequality.Semantic.DeepEqual(nv.Field(i).Interface(), ov.Field(i).Interface()) {
			changed = append(changed, jsonName(t.Field(i)))
		}
	}
	return changed
}

// ValidateStatefulSetStatusUpdate validates a write to a StatefulSet's
// status: counts ≥ 0 and within status.replicas, available ≤ ready, a
// collision count that never decreases, and well-formed conditions.
func ValidateStatefulSetStatusUpdate(newSts, oldSts *appsv1.StatefulSet) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("StatefulSet", &newSts.ObjectMeta, &oldSts.ObjectMeta)
	errs = append(errs, validateStatefulSetStatus(&newSts.Status, field.NewPath("status"))...)
	return append(errs, validateCollisionCountUpdate(newSts.Status.CollisionCount, oldSts.Status.CollisionCount)...)
}

func validateStatefulSetStatus(s *appsv1.StatefulSetStatus, fldPath *field.Path) field.ErrorList {
	errs := validateNonNegative(s.ObservedGeneration, fldPath.Child("observedGeneration"))
	counts := []struct {
		name string
		v    int32
	}{
		{"replicas", s.Replicas}, {"readyReplicas", s.ReadyReplicas}, {"currentReplicas", s.CurrentReplicas},
		{"updatedReplicas", s.UpdatedReplicas}, {"availableReplicas", s.AvailableReplicas},
	}
	for _, c := range counts {
		errs = append(errs, validateNonNegative(c.v, fldPath.Child(c.name))...)
		if c.name != "replicas" && s.Replicas >= 0 {
			errs = append(errs, validateNotMoreThan(c.v, s.Replicas, "status.replicas", fldPath.Child(c.name))...)
		}
	}
	errs = append(errs, validateNotMoreThan(s.AvailableReplicas, s.ReadyReplicas, "status.readyReplicas", fldPath.Child("availableReplicas"))...)
	errs = append(errs, validateOptionalNonNegative(s.CollisionCount, fldPath.Child("collisionCount"))...)
	conds := make([]workloadCondition, len(s.Conditions))
	for i, c := range s.Conditions {
		conds[i] = workloadCondition{Type: string(c.Type), Status: c.Status}
	}
	return append(errs, validateConditions(conds, fldPath.Child("conditions"))...)
}
