package statefulset

import (
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"portal.dev/portal/controller/internal/workload"
)

// kind is the StatefulSet kind, for the ownerReferences the controller
// writes.
var kind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// A StatefulSet's history is a ControllerRevision per distinct pod
// template. Its data is the patch upstream stores, the template under
// spec.template with "$patch": "replace", so that `kubectl rollout
// history` and `undo` read Portal's revisions as they read Kubernetes'.

// revisionData returns the patch that sets set's pod template.
func revisionData(set *appsv1.StatefulSet) ([]byte, error) {
	raw, err := json.Marshal(set.Spec.Template)
	if err != nil {
		return nil, err
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		return nil, err
	}
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// newRevision builds the revision of set's current template, numbered
// number and not yet named (workload.CreateRevision names it).
func newRevision(set *appsv1.StatefulSet, number int64) (*appsv1.ControllerRevision, error) {
	data, err := revisionData(set)
	if err != nil {
		return nil, fmt.Errorf("encode template of %s/%s: %w", set.Namespace, set.Name, err)
	}
	rev := workload.NewRevision(set, kind, set.Spec.Template.Labels, runtime.RawExtension{Raw: data}, number)
	rev.Annotations = maps.Clone(set.Annotations)
	return rev, nil
}

// applyRevision returns a copy of set with the pod template rev holds.
func applyRevision(set *appsv1.StatefulSet, rev *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	var patch struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &patch); err != nil {
		return nil, fmt.Errorf("decode revision %s/%s: %w", rev.Namespace, rev.Name, err)
	}
	out := set.DeepCopy()
	out.Spec.Template = patch.Spec.Template
	return out, nil
}

// liveRevisions names the revisions history must keep whatever the
// limit: the current and update ones and those pods still run.
func liveRevisions(pods []*corev1.Pod, current, update string) map[string]bool {
	live := map[string]bool{current: true, update: true}
	for _, p := range pods {
		live[revisionOf(p)] = true
	}
	return live
}
