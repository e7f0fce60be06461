package gc

import (
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSlimKeepsWhatTheGraphReads checks that the informers keep what the
// graph and a relist need and nothing else, and that objects of one
// namespace share its name rather than keep a decoded copy each.
func TestSlimKeepsWhatTheGraphReads(t *testing.T) {
	now := metav1.Now()
	in := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: string([]byte("team-a")), UID: types.UID("uid-" + name), ResourceVersion: "7",
				Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"},
				DeletionTimestamp: &now, Finalizers: []string{finalizerForeground},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "owner"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "client"}},
			},
		}
	}
	var got [2]*metav1.PartialObjectMetadata
	for i, name := range []string{"a", "b"} {
		out, err := slim(in(name))
		if err != nil {
			t.Fatal(err)
		}
		got[i] = out.(*metav1.PartialObjectMetadata)
	}
	a := got[0]
	if a.TypeMeta != (metav1.TypeMeta{}) || a.Labels != nil || a.Annotations != nil || a.ManagedFields != nil {
		t.Errorf("slim kept type, labels, annotations or managed fields: %+v", a)
	}
	if a.Name != "a" || a.Namespace != "team-a" || a.UID != "uid-a" || a.ResourceVersion != "7" ||
		a.DeletionTimestamp == nil || len(a.Finalizers) != 1 || len(a.OwnerReferences) != 1 {
		t.Errorf("slim lost what the graph reads: %+v", a)
	}
	if unsafe.StringData(a.Namespace) != unsafe.StringData(got[1].Namespace) {
		t.Errorf("namespace %q: got two copies, want one", a.Namespace)
	}
}
