package gc

import (
	"slices"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestToObjectKeepsWhatTheGraphReads checks that the graph's node keeps
// who the object is, whom it belongs to and how it is being deleted, and
// that objects of one namespace share its name and their owner's
// reference strings rather than keep a decoded copy each.
func TestToObjectKeepsWhatTheGraphReads(t *testing.T) {
	now := metav1.Now()
	in := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: string([]byte("team-a")), UID: types.UID("uid-" + name), ResourceVersion: "7",
				Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"},
				DeletionTimestamp: &now, Finalizers: []string{finalizerForeground},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: string([]byte("web")), UID: "owner"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "client"}},
			},
		}
	}
	var got [2]object
	for i, name := range []string{"a", "b"} {
		got[i] = toObject(&configMaps, in(name))
	}
	a := got[0]
	if a.resource() != configMaps || a.Name != "a" || a.Namespace != "team-a" || a.UID != "uid-a" ||
		!a.Deleting || !a.Foreground || a.Orphan || len(a.Owners) != 1 || a.Owners[0].Name != "web" {
		t.Errorf("toObject: got %+v, want the object's identity, owner and foreground deletion", a)
	}
	if unsafe.StringData(a.Namespace) != unsafe.StringData(got[1].Namespace) {
		t.Errorf("namespace %q: got two copies, want one", a.Namespace)
	}
	if unsafe.StringData(a.Owners[0].Name) != unsafe.StringData(got[1].Owners[0].Name) {
		t.Errorf("owner name %q: got two copies, want one", a.Owners[0].Name)
	}
}

// TestRelistForgetsObjectsNotListed checks that a relist removes from the
// graph the objects of its resource it no longer holds, among them an
// object replaced by one of the same name and another UID while no watch
// ran, and leaves other resources' objects alone.
func TestRelistForgetsObjectsNotListed(t *testing.T) {
	objs := []*metav1.PartialObjectMetadata{
		pom("ConfigMap", "ns", "a", "a-1"), pom("ConfigMap", "ns", "b", "b-1"), pom("Secret", "ns", "s", "s-1"),
	}
	run(t, objs, func(e *testEnv) {
		if got, want := graphUIDs(e.c), []types.UID{"a-1", "b-1", "s-1"}; !slices.Equal(got, want) {
			t.Fatalf("graph after the first lists: got %v, want %v", got, want)
		}
		e.c.mu.Lock()
		m := e.c.monitors[configMaps]
		e.c.mu.Unlock()
		if err := m.Replace([]any{pom("ConfigMap", "ns", "a", "a-2")}, "9"); err != nil {
			t.Fatal(err)
		}
		if got, want := graphUIDs(e.c), []types.UID{"a-2", "s-1"}; !slices.Equal(got, want) {
			t.Errorf("graph after a relist of configmaps holding a-2 only: got %v, want %v", got, want)
		}
	})
}

// graphUIDs returns the UIDs the graph holds, sorted.
func graphUIDs(c *Collector) []types.UID {
	c.graph.mu.Lock()
	defer c.graph.mu.Unlock()
	var out []types.UID
	for uid := range c.graph.nodes {
		out = append(out, uid)
	}
	for k := range c.graph.leaves {
		out = append(out, k.uid())
	}
	slices.Sort(out)
	return out
}
