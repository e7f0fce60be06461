package namespace

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// remaining is what one pass over a terminating namespace left behind and
// why: objects still there by resource, the finalizers that hold them, and
// the resources whose deletion failed.
type remaining struct {
	// objects counts objects by "resource.group" ("pods." for the core
	// group, as upstream writes it).
	objects map[string]int
	// finalizers counts the objects each finalizer holds.
	finalizers map[string]int
	// failed holds one error per resource that could not be deleted.
	failed []error
}

func (r *remaining) add(resource string, finalizers []string) {
	if r.objects == nil {
		r.objects, r.finalizers = map[string]int{}, map[string]int{}
	}
	r.objects[resource]++
	for _, f := range finalizers {
		r.finalizers[f]++
	}
}

// count is how many objects are left.
func (r *remaining) count() int {
	n := 0
	for _, c := range r.objects {
		n += c
	}
	return n
}

// conditionTypes are the namespace conditions the deletion keeps, in the
// order upstream's namespace controller writes them. Portal discovers no
// resources (it serves a fixed set), so the first two always report
// success; they are kept so that clients reading them find upstream's.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// okConditions are the reasons and messages of conditions that report
// nothing wrong (status False), upstream's words.
var okConditions = map[corev1.NamespaceConditionType][2]string{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentRemoved", "All content successfully removed"},
}

// failing returns the conditions that say what blocks the deletion
// (status True), keyed by type; a type missing from it reports success.
func (r *remaining) failing() map[corev1.NamespaceConditionType]corev1.NamespaceCondition {
	out := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	if len(r.failed) > 0 {
		msgs := make([]string, len(r.failed))
		for i, err := range r.failed {
			msgs[i] = err.Error()
		}
		slices.Sort(msgs)
		out[corev1.NamespaceDeletionContentFailure] = corev1.NamespaceCondition{
			Reason:  "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %s", len(msgs), strings.Join(msgs, ", ")),
		}
	}
	if objects := describe(r.objects, "%s has %d resource instances"); objects != "" {
		out[corev1.NamespaceContentRemaining] = corev1.NamespaceCondition{
			Reason: "SomeResourcesRemain", Message: "Some resources are remaining: " + objects,
		}
	}
	if finalizers := describe(r.finalizers, "%s in %d resource instances"); finalizers != "" {
		out[corev1.NamespaceFinalizersRemaining] = corev1.NamespaceCondition{
			// Upstream's reason, singular "Finalizer" included.
			Reason: "SomeFinalizerRemain", Message: "Some finalizers are remaining: " + finalizers,
		}
	}
	return out
}

// describe lists counts by name, sorted, so that an unchanged state gives
// an unchanged message and no status write.
func describe(counts map[string]int, format string) string {
	var parts []string
	for name, n := range counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf(format, name, n))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// setConditions writes r's conditions into status and reports whether any
// changed. A condition's transition time moves only when its status does.
func setConditions(status *corev1.NamespaceStatus, r *remaining, now metav1.Time) bool {
	failing := r.failing()
	changed := false
	for _, typ := range conditionTypes {
		want, bad := failing[typ]
		want.Type, want.Status, want.LastTransitionTime = typ, corev1.ConditionTrue, now
		if !bad {
			ok := okConditions[typ]
			want.Status, want.Reason, want.Message = corev1.ConditionFalse, ok[0], ok[1]
		}
		i := slices.IndexFunc(status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == typ })
		if i < 0 {
			status.Conditions = append(status.Conditions, want)
			changed = true
			continue
		}
		old := &status.Conditions[i]
		if old.Status == want.Status && old.Reason == want.Reason && old.Message == want.Message {
			continue
		}
		if old.Status == want.Status {
			want.LastTransitionTime = old.LastTransitionTime
		}
		*old = want
		changed = true
	}
	return changed
}
