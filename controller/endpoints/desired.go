package endpoints

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
)

// FieldManager is the field manager this controller writes Endpoints as.
// Its entry in managedFields is how the controller recognises Endpoints it
// created after their Service is gone (see [CreatedByController]).
const FieldManager = "endpoint-controller"

// Desired returns the Endpoints the controller wants for svc, given the
// pods its selector matches and the current Endpoints (nil if there is
// none). Everything not derived from the Service is kept from current:
// the object's identity and resourceVersion, and annotations other than
// the two this controller owns. Labels are the Service's plus
// service.kubernetes.io/headless for headless Services. triggerTime, when
// not zero, becomes the endpoints.kubernetes.io/last-change-trigger-time
// annotation; more than [MaxCapacity] addresses are truncated and marked
// with endpoints.kubernetes.io/over-capacity.
func Desired(svc *corev1.Service, pods []*corev1.Pod, current *corev1.Endpoints, triggerTime time.Time) *corev1.Endpoints {
	subsets, truncated := Truncate(Subsets(svc, pods), MaxCapacity)
	if truncated {
		// Truncation may leave two port groups with the same addresses;
		// repack again so that what is written is canonical.
		subsets = Repack(subsets)
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
	if current != nil {
		// Only the metadata is kept: copying current's subsets, which are
		// replaced, would copy every address of a large Service per sync.
		ep = &corev1.Endpoints{TypeMeta: current.TypeMeta, ObjectMeta: *current.ObjectMeta.DeepCopy()}
	}
	ep.Subsets = subsets
	ep.Labels = desiredLabels(svc)
	ep.Annotations = desiredAnnotations(ep.Annotations, truncated, triggerTime)
	return ep
}

func desiredLabels(svc *corev1.Service) map[string]string {
	labels := maps.Clone(svc.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		labels[corev1.IsHeadlessService] = ""
	} else {
		delete(labels, corev1.IsHeadlessService)
	}
	return labels
}

func desiredAnnotations(current map[string]string, truncated bool, triggerTime time.Time) map[string]string {
	a := maps.Clone(current)
	if a == nil {
		a = map[string]string{}
	}
	if triggerTime.IsZero() {
		delete(a, corev1.EndpointsLastChangeTriggerTime)
	} else {
		a[corev1.EndpointsLastChangeTriggerTime] = triggerTime.UTC().Format(time.RFC3339Nano)
	}
	if truncated {
		a[corev1.EndpointsOverCapacity] = overCapacityTruncated
	} else {
		delete(a, corev1.EndpointsOverCapacity)
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// NeedsUpdate reports whether current (nil if absent) must be written to
// become desired. The trigger-time annotation alone is no reason to write:
// it describes a change and only travels with one. Subsets are compared in
// canonical form and ignoring target resourceVersions, so a reordered or
// merely re-versioned object is left alone.
func NeedsUpdate(current, desired *corev1.Endpoints) bool {
	if current == nil {
		return true
	}
	// What this controller wrote is canonical already, so current is
	// repacked (a copy of every address) only when it differs as it is.
	return !sameSubsets(current.Subsets, desired.Subsets) ||
		!equality.Semantic.DeepEqual(current.Labels, desired.Labels) ||
		current.Annotations[corev1.EndpointsOverCapacity] != desired.Annotations[corev1.EndpointsOverCapacity]
}

func sameSubsets(current, desired []corev1.EndpointSubset) bool {
	return semanticIgnoringRV.DeepEqual(current, desired) ||
		semanticIgnoringRV.DeepEqual(Repack(current), desired)
}

// semanticIgnoringRV is semantic equality that ignores the resourceVersion
// in object references, so a pod update that changes nothing the
// Endpoints shows does not cause a write.
var semanticIgnoringRV = conversion.EqualitiesOrDie(
	func(a, b corev1.ObjectReference) bool {
		a.ResourceVersion, b.ResourceVersion = "", ""
		return a == b
	},
)

// CreatedByController reports whether ep was written by this controller,
// judged by its managedFields. Endpoints of selector-less Services are
// written by users or other components and never carry this manager, so
// they are safe from deletion when their Service goes.
func CreatedByController(ep *corev1.Endpoints) bool {
	for _, f := range ep.ManagedFields {
		if f.Manager == FieldManager {
			return true
		}
	}
	return false
}
