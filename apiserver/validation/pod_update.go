package validation

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// updatablePodSpecFields is the list upstream's error message names.
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// ValidatePodUpdate validates an update of a Pod's spec and metadata. A
// running Pod's spec is fixed except for container images, a shorter
// activeDeadlineSeconds, added tolerations and removed scheduling gates.
func ValidatePodUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Pod", &newPod.ObjectMeta, &oldPod.ObjectMeta)
	errs = append(errs, ValidatePod(newPod)...)
	specPath := field.NewPath("spec")
	if len(newPod.Spec.Containers) != len(oldPod.Spec.Containers) ||
		len(newPod.Spec.InitContainers) != len(oldPod.Spec.InitContainers) {
		// The image munging below needs matching containers.
		return append(errs, field.Forbidden(specPath.Child("containers"), "pod updates may not add or remove containers"))
	}
	errs = append(errs, validateActiveDeadlineUpdate(newPod.Spec.ActiveDeadlineSeconds, oldPod.Spec.ActiveDeadlineSeconds, specPath)...)
	errs = append(errs, validateOnlyAddedTolerations(newPod.Spec.Tolerations, oldPod.Spec.Tolerations, specPath.Child("tolerations"))...)
	errs = append(errs, validateOnlyDeletedGates(newPod.Spec.SchedulingGates, oldPod.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)
	munged := mungePodSpec(&newPod.Spec, &oldPod.Spec)
	if !apiequality.Semantic.DeepEqual(*munged, oldPod.Spec) {
		msg := fmt.Sprintf("pod updates may not change fields other than %s\n%v", strings.Join(updatablePodSpecFields, ","), cmp.Diff(oldPod.Spec, *munged))
		errs = append(errs, field.Forbidden(specPath, msg))
	}
	return errs
}

// mungePodSpec returns newSpec with every field that may change set back to
// its old value, so that what remains must equal oldSpec.
func mungePodSpec(newSpec, oldSpec *corev1.PodSpec) *corev1.PodSpec {
	m := newSpec.DeepCopy()
	for i := range m.Containers {
		m.Containers[i].Image = oldSpec.Containers[i].Image
	}
	for i := range m.InitContainers {
		m.InitContainers[i].Image = oldSpec.InitContainers[i].Image
	}
	m.ActiveDeadlineSeconds = oldSpec.ActiveDeadlineSeconds
	m.SchedulingGates = oldSpec.SchedulingGates
	m.Tolerations = oldSpec.Tolerations
	// A negative grace period (from old clients) may be corrected to 1.
	if o, n := oldSpec.TerminationGracePeriodSeconds, m.TerminationGracePeriodSeconds; o != nil && *o < 0 && n != nil && *n == 1 {
		m.TerminationGracePeriodSeconds = o
	}
	return m
}

func validateActiveDeadlineUpdate(newVal, oldVal *int64, specPath *field.Path) field.ErrorList {
	path := specPath.Child("activeDeadlineSeconds")
	switch {
	case oldVal == nil:
		return nil
	case newVal == nil:
		return field.ErrorList{field.Invalid(path, newVal, "must not update from a positive integer to nil value")}
	case *newVal > *oldVal:
		return field.ErrorList{field.Invalid(path, *newVal, "must be less than or equal to previous value")}
	}
	return nil
}

// validateOnlyAddedTolerations allows new tolerations, and changed
// tolerationSeconds on old ones, but nothing else.
func validateOnlyAddedTolerations(newTols, oldTols []corev1.Toleration, path *field.Path) field.ErrorList {
	for _, old := range oldTols {
		found := false
		for _, n := range newTols {
			o := old
			o.TolerationSeconds = n.TolerationSeconds
			if reflect.DeepEqual(o, n) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(path, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

func validateOnlyDeletedGates(newGates, oldGates []corev1.PodSchedulingGate, path *field.Path) field.ErrorList {
	old := map[string]bool{}
	for _, g := range oldGates {
		old[g.Name] = true
	}
	var errs field.ErrorList
	for i, g := range newGates {
		if !old[g.Name] {
			errs = append(errs, field.Forbidden(path.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}
