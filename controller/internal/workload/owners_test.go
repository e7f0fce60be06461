package workload

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// testOwners reads sets through a lister, as a controller does.
func testOwners(sets ...*appsv1.ReplicaSet) Owners[*appsv1.ReplicaSet] {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, rs := range sets {
		if err := idx.Add(rs); err != nil {
			panic(err)
		}
	}
	return NewOwners("ReplicaSet", appslisters.NewReplicaSetLister(idx).ReplicaSets,
		func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector })
}

func ownerRS(name, uid string, sel map[string]string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	if sel != nil {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
	}
	return rs
}

func TestOwnersKey(t *testing.T) {
	o := testOwners(ownerRS("web", "web-uid", nil))
	cases := []struct {
		name string
		ref  *metav1.OwnerReference
		want string
	}{
		{name: "no reference"},
		{name: "known owner", ref: &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "web-uid"}, want: "ns/web"},
		{name: "re-created under the same name", ref: &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "old-uid"}},
		{name: "another kind", ref: &metav1.OwnerReference{Kind: "DaemonSet", Name: "web", UID: "web-uid"}},
		{name: "not in the cache", ref: &metav1.OwnerReference{Kind: "ReplicaSet", Name: "db", UID: "db-uid"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := o.Key("ns", tc.ref)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("Key: got %q, %v, want %q", got, ok, tc.want)
			}
		})
	}
}

func TestOwnersSelecting(t *testing.T) {
	o := testOwners(
		ownerRS("web", "1", map[string]string{"app": "web"}),
		ownerRS("all", "2", map[string]string{}),
		ownerRS("web-canary", "3", map[string]string{"app": "web", "track": "canary"}),
		ownerRS("also-web", "4", map[string]string{"app": "web"}),
	)
	got, err := o.Selecting("ns", map[string]string{"app": "web"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got) // in the lister's order, which is none
	if want := []string{"ns/also-web", "ns/web"}; !slices.Equal(got, want) {
		t.Fatalf("Selecting: got %v, want %v", got, want)
	}
	if got, _ := o.Selecting("ns", nil); len(got) != 0 {
		t.Fatalf("Selecting a Pod without labels: got %v, want none", got)
	}
}
