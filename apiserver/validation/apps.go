package validation

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules shared by the four apps/v1 workload kinds, after
// k8s.io/kubernetes/pkg/apis/apps/validation: a required, non-empty
// selector that selects the pod template's labels, a template whose spec is
// validated exactly as a Pod's, and rolling-update budgets given as an
// integer or a percent.

// selectorMismatch is upstream's message when a workload's selector does not
// select its own pods.
const selectorMismatch = "`selector` does not match template `labels`"

// validateNonNegative is upstream's ValidateNonnegativeField for the int32
// and int64 counts of the apps kinds.
func validateNonNegative[T int32 | int64](v T, fldPath *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateNonnegativeField(int64(v), fldPath)
}

// validateOptionalNonNegative checks a count that may be unset.
func validateOptionalNonNegative[T int32 | int64](v *T, fldPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return validateNonNegative(*v, fldPath)
}

// validateWorkloadSelector checks spec.selector: required, well formed and
// not empty (an empty selector would select every pod in the namespace).
// kind names the workload in upstream's message. It returns the parsed
// selector, or nil when there is none to match the template against.
func validateWorkloadSelector(sel *metav1.LabelSelector, kind string, fldPath *field.Path) (labels.Selector, field.ErrorList) {
	if sel == nil {
		return nil, field.ErrorList{field.Required(fldPath, "")}
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, fldPath)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(fldPath, sel, "empty selector is invalid for "+kind))
	}
	parsed, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		// ValidateLabelSelector has already said why.
		if len(errs) == 0 {
			errs = append(errs, field.Invalid(fldPath, sel, "invalid label selector"))
		}
		return nil, errs
	}
	return parsed, errs
}

// validateWorkloadTemplate checks spec.template: its labels must be
// selected by sel (when sel parsed), its metadata must be valid labels and
// annotations, and its spec must be a valid Pod spec that restarts always
// (a controller, not the kubelet, replaces a pod that ends) and has no
// deadline. kind is used in upstream's activeDeadlineSeconds message.
func validateWorkloadTemplate(tmpl *corev1.PodTemplateSpec, sel labels.Selector, kind string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sel != nil && !sel.Empty() && !sel.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("metadata", "labels"), tmpl.Labels, selectorMismatch))
	}
	errs = append(errs, validatePodTemplateSpec(tmpl, fldPath)...)
	specPath := fldPath.Child("spec")
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(specPath.Child("restartPolicy"), tmpl.Spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(specPath.Child("activeDeadlineSeconds"), fmt.Sprintf("activeDeadlineSeconds in %s is not Supported", kind)))
	}
	return errs
}

// validatePodTemplateSpec is upstream's core ValidatePodTemplateSpec. The
// label and annotation paths omit "metadata", as upstream's do.
func validatePodTemplateSpec(tmpl *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(tmpl.Labels, fldPath.Child("labels"))
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(tmpl.Annotations, fldPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&tmpl.Spec, fldPath.Child("spec"))...)
	if len(tmpl.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// validateSelectorUpdate enforces apps/v1's rule that a workload's selector
// never changes: its existing pods would be orphaned or adopted by surprise.
func validateSelectorUpdate(newSel, oldSel *metav1.LabelSelector) field.ErrorList {
	return apimachineryvalidation.ValidateImmutableField(newSel, oldSel, field.NewPath("spec", "selector"))
}

// validateIntOrPercent checks a rolling-update budget: an integer ≥ 0 or a
// percent such as "25%".
func validateIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.String:
		return msgsToErrs(fldPath, v, utilvalidation.IsValidPercent(v.StrVal))
	case intstr.Int:
		return apimachineryvalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)
	default:
		return field.ErrorList{field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%')")}
	}
}

// percentOf returns the number in a valid percent string.
func percentOf(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(utilvalidation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, err := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, err == nil
}

// intOrPercentValue is the number in v, whether a count or a percent, so
// that "0%" and 0 are both zero.
func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentOf(v); ok {
		return n
	}
	return v.IntValue()
}

// validateAtMost100Percent rejects a percent over 100%: a budget larger than
// the whole set means nothing.
func validateAtMost100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if n, ok := percentOf(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

// validateNotMoreThan reports a status count above the count it is part of.
func validateNotMoreThan(v, limit int32, limitName string, fldPath *field.Path) field.ErrorList {
	if v > limit {
		return field.ErrorList{field.Invalid(fldPath, v, "cannot be greater than "+limitName)}
	}
	return nil
}

// validateCollisionCountUpdate: the collision count only grows; the
// controllers use it to pick fresh names after a hash collision.
func validateCollisionCountUpdate(newCount, oldCount *int32) field.ErrorList {
	if oldCount == nil || (newCount != nil && *newCount >= *oldCount) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("status", "collisionCount"), deref(newCount), "cannot be decremented")}
}

var supportedConditionStatuses = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}

// workloadCondition is the part of a workload status condition that is
// checked; the four kinds each have their own condition type.
type workloadCondition struct {
	Type   string
	Status corev1.ConditionStatus
}

// validateConditions requires each condition to have a type, unique in the
// list (clients such as kubectl rollout status look one up by type), and a
// status of True, False or Unknown.
func validateConditions(conds []workloadCondition, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range conds {
		idxPath := fldPath.Index(i)
		switch {
		case c.Type == "":
			errs = append(errs, field.Required(idxPath.Child("type"), ""))
		case seen[c.Type]:
			errs = append(errs, field.Duplicate(idxPath.Child("type"), c.Type))
		}
		seen[c.Type] = true
		errs = append(errs, validateEnum(c.Status, supportedConditionStatuses, idxPath.Child("status"))...)
	}
	return errs
}
