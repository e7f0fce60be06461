package statefulset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
)

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

// revisionName names a revision by its data and the set's collision
// count, which bumps the name when another revision already has it.
func revisionName(set *appsv1.StatefulSet, data []byte, collisions int32) string {
	h := fnv.New32()
	h.Write(data)
	h.Write([]byte(strconv.FormatInt(int64(collisions), 10)))
	prefix := set.Name
	// A revision name is a DNS subdomain: at most 253 characters.
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// newRevision builds the revision of set's current template, numbered
// number.
func newRevision(set *appsv1.StatefulSet, number int64, collisions int32) (*appsv1.ControllerRevision, error) {
	data, err := revisionData(set)
	if err != nil {
		return nil, fmt.Errorf("encode template of %s/%s: %w", set.Namespace, set.Name, err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   set.Namespace,
			Name:        revisionName(set, data, collisions),
			Labels:      maps.Clone(set.Spec.Template.Labels),
			Annotations: maps.Clone(set.Annotations),
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet")),
			},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}, nil
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

// sameTemplate reports whether two revisions hold the same template.
func sameTemplate(a, b *appsv1.ControllerRevision) bool {
	return bytes.Equal(a.Data.Raw, b.Data.Raw)
}

// sortRevisions orders revisions oldest first, by number then name.
func sortRevisions(revs []*appsv1.ControllerRevision) {
	slices.SortStableFunc(revs, func(a, b *appsv1.ControllerRevision) int {
		if a.Revision != b.Revision {
			return int(a.Revision - b.Revision)
		}
		return bytes.Compare([]byte(a.Name), []byte(b.Name))
	})
}

// nextNumber is the number the next revision gets.
func nextNumber(sorted []*appsv1.ControllerRevision) int64 {
	if len(sorted) == 0 {
		return 1
	}
	return sorted[len(sorted)-1].Revision + 1
}

// revisionsToPrune returns the revisions beyond set's
// revisionHistoryLimit, oldest first, never one a pod still uses nor the
// current or update revision.
func revisionsToPrune(set *appsv1.StatefulSet, sorted []*appsv1.ControllerRevision, pods []*corev1.Pod, current, update string) []*appsv1.ControllerRevision {
	live := map[string]bool{current: true, update: true}
	for _, p := range pods {
		live[revisionOf(p)] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range sorted {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	if len(old) <= limit {
		return nil
	}
	return old[:len(old)-limit]
}
