package workload

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func testOwners(sets ...*appsv1.ReplicaSet) Owners[*appsv1.ReplicaSet] {
	return Owners[*appsv1.ReplicaSet]{
		Kind: "ReplicaSet",
		Get: func(ns, name string) (*appsv1.ReplicaSet, error) {
			for _, rs := range sets {
				if rs.Namespace == ns && rs.Name == name {
					return rs, nil
				}
			}
			return nil, errors.NewNotFound(schema.GroupResource{Resource: "replicasets"}, name)
		},
		List: func(ns string) ([]*appsv1.ReplicaSet, error) {
			var out []*appsv1.ReplicaSet
			for _, rs := range sets {
				if rs.Namespace == ns {
					out = append(out, rs)
				}
			}
			return out, nil
		},
		Selector: func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector },
	}
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
	if want := []string{"ns/web", "ns/also-web"}; !slices.Equal(got, want) {
		t.Fatalf("Selecting: got %v, want %v", got, want)
	}
	if got, _ := o.Selecting("ns", nil); len(got) != 0 {
		t.Fatalf("Selecting a Pod without labels: got %v, want none", got)
	}
}
