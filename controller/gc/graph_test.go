package gc

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ref is an owner reference to uid, blocking when block is set.
func ref(uid string, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner-" + uid, UID: types.UID(uid), BlockOwnerDeletion: &block}
}

// obj is an object in namespace "ns" with the given owners.
func obj(uid string, owners ...metav1.OwnerReference) object {
	return object{Namespace: "ns", Name: "name-" + uid, UID: types.UID(uid), Owners: owners}
}

func foregroundDeleting(o object) object {
	o.Deleting, o.Foreground = true, true
	return o
}

func orphaning(o object) object {
	o.Deleting, o.Orphan = true, true
	return o
}

func uids(s ...string) []types.UID {
	out := make([]types.UID, 0, len(s))
	for _, x := range s {
		out = append(out, types.UID(x))
	}
	return out
}

func TestGraphChanges(t *testing.T) {
	tests := []struct {
		name  string
		setup []object
		op    func(g *graph) []types.UID
		want  []types.UID
	}{
		{
			name: "new object without owners needs no look",
			op:   func(g *graph) []types.UID { return g.upsert(obj("a")) },
			want: uids(),
		},
		{
			name: "new object with an owner is examined",
			op:   func(g *graph) []types.UID { return g.upsert(obj("d", ref("o", false))) },
			want: uids("d"),
		},
		{
			name:  "unchanged update needs no look",
			setup: []object{obj("d", ref("o", false))},
			op:    func(g *graph) []types.UID { return g.upsert(obj("d", ref("o", false))) },
			want:  uids(),
		},
		{
			name:  "new owner reference is examined",
			setup: []object{obj("d", ref("o", false))},
			op:    func(g *graph) []types.UID { return g.upsert(obj("d", ref("o", false), ref("p", false))) },
			want:  uids("d"),
		},
		{
			name:  "dropping a blocking reference wakes the waiting owner",
			setup: []object{foregroundDeleting(obj("o")), obj("d", ref("o", true))},
			op:    func(g *graph) []types.UID { return g.upsert(obj("d")) },
			want:  uids("d", "o"),
		},
		{
			name:  "unblocking a reference wakes the waiting owner",
			setup: []object{foregroundDeleting(obj("o")), obj("d", ref("o", true))},
			op:    func(g *graph) []types.UID { return g.upsert(obj("d", ref("o", false))) },
			want:  uids("d", "o"),
		},
		{
			name:  "dropping a reference to an owner not deleting wakes nobody else",
			setup: []object{obj("o"), obj("d", ref("o", true))},
			op:    func(g *graph) []types.UID { return g.upsert(obj("d")) },
			want:  uids("d"),
		},
		{
			name:  "owner entering foreground deletion is examined with its dependents",
			setup: []object{obj("o"), obj("d1", ref("o", true)), obj("d2", ref("o", false))},
			op:    func(g *graph) []types.UID { return g.upsert(foregroundDeleting(obj("o"))) },
			want:  uids("d1", "d2", "o"),
		},
		{
			name:  "owner already in foreground deletion is not re-examined",
			setup: []object{foregroundDeleting(obj("o")), obj("d1", ref("o", true))},
			op:    func(g *graph) []types.UID { return g.upsert(foregroundDeleting(obj("o"))) },
			want:  uids(),
		},
		{
			name:  "owner entering orphan deletion is examined",
			setup: []object{obj("o"), obj("d", ref("o", true))},
			op:    func(g *graph) []types.UID { return g.upsert(orphaning(obj("o"))) },
			want:  uids("o"),
		},
		{
			name:  "owner going away wakes its dependents",
			setup: []object{obj("o"), obj("d1", ref("o", false)), obj("d2", ref("o", false), ref("p", false))},
			op:    func(g *graph) []types.UID { return g.remove("o") },
			want:  uids("d1", "d2"),
		},
		{
			name:  "blocking dependent going away wakes the waiting owner",
			setup: []object{foregroundDeleting(obj("o")), obj("p"), obj("d", ref("o", true), ref("p", true))},
			op:    func(g *graph) []types.UID { return g.remove("d") },
			want:  uids("o"),
		},
		{
			name: "unknown object going away needs no look",
			op:   func(g *graph) []types.UID { return g.remove("x") },
			want: uids(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g graph
			for _, o := range tc.setup {
				g.upsert(o)
			}
			got := tc.op(&g)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGraphDependents(t *testing.T) {
	var g graph
	g.upsert(obj("o"))
	g.upsert(obj("d1", ref("o", false)))
	g.upsert(obj("d2", ref("o", true), ref("p", false)))
	if got := names(g.dependentsOf("o")); !slices.Equal(got, uids("d1", "d2")) {
		t.Errorf("dependents of o: got %v, want [d1 d2]", got)
	}
	if got := names(g.dependentsOf("p")); !slices.Equal(got, uids("d2")) {
		t.Errorf("dependents of unobserved p: got %v, want [d2]", got)
	}
	g.upsert(obj("d2", ref("p", false)))
	if got := names(g.dependentsOf("o")); !slices.Equal(got, uids("d1")) {
		t.Errorf("dependents of o after d2 let go: got %v, want [d1]", got)
	}
	g.remove("d1")
	if got := g.dependentsOf("o"); len(got) != 0 {
		t.Errorf("dependents of o after d1 went: got %v, want none", names(got))
	}
	if got := g.len(); got != 2 {
		t.Errorf("objects: got %d, want 2", got)
	}
}

func TestGraphAbsent(t *testing.T) {
	var g graph
	g.upsert(obj("d", ref("o", false)))
	g.markAbsent("o", "ns")
	if !g.isAbsent("o", "ns") {
		t.Fatal("o not absent in ns after markAbsent")
	}
	if g.isAbsent("o", "other") {
		t.Error("o absent in another namespace")
	}
	g.markAbsent("x", "ns") // nobody names x: nothing to remember
	if g.isAbsent("x", "ns") {
		t.Error("x remembered as absent with no dependent")
	}
	g.upsert(obj("d")) // the last dependent lets go of o
	if g.isAbsent("o", "ns") {
		t.Error("o still remembered once nobody names it")
	}
	g.upsert(obj("d", ref("o", false)))
	g.markAbsent("o", "ns")
	g.upsert(obj("o")) // observed after all: it exists
	if g.isAbsent("o", "ns") {
		t.Error("o still absent once observed")
	}
}

func names(objs []object) []types.UID {
	out := make([]types.UID, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.UID)
	}
	return out
}
