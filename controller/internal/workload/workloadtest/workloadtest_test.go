package workloadtest

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func pod(name, rv string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// TestCatchUp: the cache ends up holding what the list holds, and the
// handler hears an add, an update and a delete as an informer's would.
func TestCatchUp(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range []corev1.Pod{pod("kept", "1"), pod("gone", "1")} {
		if err := idx.Add(&p); err != nil {
			t.Fatal(err)
		}
	}
	var heard []string
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { heard = append(heard, "add "+obj.(*corev1.Pod).Name) },
		UpdateFunc: func(old, cur any) {
			heard = append(heard, "update "+old.(*corev1.Pod).ResourceVersion+"->"+cur.(*corev1.Pod).ResourceVersion)
		},
		DeleteFunc: func(obj any) { heard = append(heard, "delete "+obj.(*corev1.Pod).Name) },
	}
	CatchUp(t, idx, []corev1.Pod{pod("kept", "2"), pod("new", "1")}, h)

	if want := []string{"update 1->2", "add new", "delete gone"}; !slices.Equal(heard, want) {
		t.Errorf("events: got %q, want %q", heard, want)
	}
	keys := idx.ListKeys()
	slices.Sort(keys)
	if want := []string{"ns/kept", "ns/new"}; !slices.Equal(keys, want) {
		t.Errorf("cache: got %v, want %v", keys, want)
	}
}
