package gc

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseUID(t *testing.T) {
	tests := []struct {
		name string
		uid  types.UID
		ok   bool
	}{
		{name: "canonical", uid: "0f8fad5b-d9cb-469f-a165-70867728950e", ok: true},
		{name: "all zero", uid: "00000000-0000-0000-0000-000000000000", ok: true},
		{name: "all f", uid: "ffffffff-ffff-ffff-ffff-ffffffffffff", ok: true},
		{name: "uppercase", uid: "0F8FAD5B-D9CB-469F-A165-70867728950E"},
		{name: "hyphen moved", uid: "0f8fad5bd-9cb-469f-a165-70867728950e"},
		{name: "no hyphens", uid: "0f8fad5bd9cb469fa16570867728950e"},
		{name: "braces", uid: "{0f8fad5b-d9cb-469f-a165-70867728950}"},
		{name: "not hex", uid: "0f8fad5b-d9cb-469f-a165-70867728950g"},
		{name: "short", uid: "a-1"},
		{name: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := parseUID(tc.uid)
			if ok != tc.ok {
				t.Fatalf("parseUID(%q): got ok %v, want %v", tc.uid, ok, tc.ok)
			}
			if ok && k.uid() != tc.uid {
				t.Errorf("parseUID(%q).uid(): got %q, want it back", tc.uid, k.uid())
			}
		})
	}
}

// uuidOf makes a canonical UID from n.
func uuidOf(n int) types.UID {
	return types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n))
}

// TestGraphLeaves checks the graph with objects kept as leaves: found as
// owners, moved to a full node when they gain an owner or start a
// deletion and back when they lose it, removed by a relist.
func TestGraphLeaves(t *testing.T) {
	cms := &schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	owner := object{Resource: cms, Namespace: "ns", Name: "o", UID: uuidOf(1)}
	dep := object{Resource: cms, Namespace: "ns", Name: "d", UID: uuidOf(2), Owners: []metav1.OwnerReference{ref(string(uuidOf(1)), true)}}
	var g graph
	g.upsert(owner)
	if len(g.leaves) != 1 || len(g.nodes) != 0 {
		t.Fatalf("owner without owners: got %d leaves and %d nodes, want 1 and 0", len(g.leaves), len(g.nodes))
	}
	got, ok := g.get(owner.UID)
	if want := (object{Resource: cms, Namespace: "ns", UID: owner.UID}); !ok || got.Resource != want.Resource || got.Namespace != want.Namespace || got.UID != want.UID {
		t.Fatalf("get(owner): got %+v, %v, want %+v", got, ok, want)
	}
	if out := g.upsert(dep); !slices.Equal(out, []types.UID{dep.UID}) {
		t.Errorf("new dependent: got %v to examine, want %v", out, dep.UID)
	}
	if _, ok := g.nodes[dep.UID]; !ok {
		t.Errorf("dependent with an owner not kept in full")
	}
	if out := g.upsert(foregroundDeleting(owner)); !slices.Equal(out, dedupe([]types.UID{owner.UID, dep.UID})) {
		t.Errorf("owner in foreground deletion: got %v to examine, want the owner and %v", out, dep.UID)
	}
	if o, _ := g.get(owner.UID); o.Name != "o" || !o.deletingDependents() || len(g.leaves) != 0 {
		t.Errorf("owner in foreground deletion: got %+v and %d leaves, want it kept in full", o, len(g.leaves))
	}
	if out := g.remove(owner.UID); !slices.Equal(out, []types.UID{dep.UID}) {
		t.Errorf("owner removed: got %v to examine, want %v", out, dep.UID)
	}
	g.upsert(object{Resource: cms, Namespace: "ns", Name: "d", UID: dep.UID}) // lets go of its owner
	g.upsert(object{Resource: cms, Namespace: "ns", Name: "d", UID: dep.UID}) // and again, unchanged
	if len(g.leaves) != 1 || len(g.nodes) != 0 || len(g.classes) != 1 || g.classes[classKey{cms, "ns"}].refs != 1 {
		t.Errorf("dependent without owners: got %d leaves, %d nodes and classes %v, want 1 leaf in 1 class and no node", len(g.leaves), len(g.nodes), g.classes)
	}
	g.removeOthers(cms, map[types.UID]struct{}{})
	if g.len() != 0 || len(g.classes) != 0 {
		t.Errorf("after a relist holding nothing: got %d objects and %d leaf classes, want none", g.len(), len(g.classes))
	}
}

// TestGraphLeafBytes pins the memory the graph keeps per object without
// owners (issue #23): a graph node with its UID string and name takes
// about 250 bytes in a map of 20,000, a leaf about 40.
func TestGraphLeafBytes(t *testing.T) {
	const n = 20000
	cms := &schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var g graph
	before := liveHeap()
	for i := range n {
		g.upsert(object{Resource: cms, Namespace: "ns", Name: fmt.Sprintf("cm-%d", i), UID: uuidOf(i)})
	}
	perObject := float64(liveHeap()-before) / n
	runtime.KeepAlive(&g)
	t.Logf("%.0f bytes per object", perObject)
	if perObject > 64 {
		t.Errorf("graph bytes per object without owners: got %.0f, want at most 64", perObject)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestCollectorLeafOwner runs the collector with the UIDs the API server
// gives, so that the owner is kept as a leaf: its dependent stays without
// a live read, and once the owner starts a foreground deletion (an update
// the leaf did not foresee) the dependent goes and the owner's finalizer
// after it.
func TestCollectorLeafOwner(t *testing.T) {
	owner := pom("ConfigMap", "ns", "owner", string(uuidOf(1)))
	dep := pom("Secret", "ns", "dep", string(uuidOf(2)), ownedBy(owner, true))
	run(t, []*metav1.PartialObjectMetadata{owner, dep}, func(e *testEnv) {
		e.c.graph.mu.Lock()
		leaves := len(e.c.graph.leaves)
		e.c.graph.mu.Unlock()
		if leaves != 1 {
			e.t.Errorf("leaves: got %d, want 1 (the owner)", leaves)
		}
		for _, a := range e.client.Actions() {
			if a.GetVerb() == "get" {
				e.t.Errorf("got a live get of %s, want none while the owner is observed", a.GetResource().Resource)
			}
		}
		e.wantKept(secrets, "ns", "dep")
		if err := e.client.Tracker().Update(configMaps, deleting(owner, finalizerForeground), "ns"); err != nil {
			e.t.Fatal(err)
		}
		e.settle()
		e.wantGone(secrets, "ns", "dep")
		if got := e.wantKept(configMaps, "ns", "owner"); len(got.Finalizers) != 0 {
			e.t.Errorf("owner finalizers: got %v, want none", got.Finalizers)
		}
	})
}
