package validation

import (
	"bytes"
	"encoding/json"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateControllerRevision validates a ControllerRevision: metadata, data
// present and revision ≥ 0.
func ValidateControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	errs := ValidateObjectMetaFor("ControllerRevision", &cr.ObjectMeta, true)
	if cr.Data.Raw == nil && cr.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, validateNonNegative(cr.Revision, field.NewPath("revision"))...)
}

// ValidateControllerRevisionUpdate validates an update of a
// ControllerRevision. Its data is immutable: a revision is a snapshot that
// rollbacks restore. The revision number may change, since the controllers
// renumber a revision they roll back to.
func ValidateControllerRevisionUpdate(newCR, oldCR *appsv1.ControllerRevision) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("ControllerRevision", &newCR.ObjectMeta, &oldCR.ObjectMeta)
	errs = append(errs, ValidateControllerRevision(newCR)...)
	if !sameRawData(newCR.Data, oldCR.Data) {
		errs = append(errs, field.Invalid(field.NewPath("data"), newCR.Data, apimachineryvalidation.FieldImmutableErrorMsg))
	}
	return errs
}

// sameRawData compares two revisions' data as JSON values, so that a
// client that sends the stored data back re-encoded (other whitespace or
// key order) is not refused.
func sameRawData(a, b runtime.RawExtension) bool {
	if a.Object != nil || b.Object != nil {
		return apiequality.Semantic.DeepEqual(a, b)
	}
	if bytes.Equal(a.Raw, b.Raw) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a.Raw, &va) != nil || json.Unmarshal(b.Raw, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// ValidateScale validates a write to a scale subresource: metadata and
// spec.replicas ≥ 0.
func ValidateScale(scale *autoscalingv1.Scale) field.ErrorList {
	errs := ValidateObjectMetaFor("Scale", &scale.ObjectMeta, true)
	return append(errs, validateNonNegative(scale.Spec.Replicas, field.NewPath("spec", "replicas"))...)
}
