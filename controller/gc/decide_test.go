package gc

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestJudge(t *testing.T) {
	tests := []struct {
		name   string
		refs   []metav1.OwnerReference
		states []ownerState
		want   verdict
	}{
		{
			name: "no owners: keep",
			want: verdict{},
		},
		{
			name:   "solid owner: keep",
			refs:   []metav1.OwnerReference{ref("a", false)},
			states: []ownerState{ownerSolid},
			want:   verdict{},
		},
		{
			name:   "only owner absent: delete in the background",
			refs:   []metav1.OwnerReference{ref("a", true)},
			states: []ownerState{ownerAbsent},
			want:   verdict{Delete: true, Policy: metav1.DeletePropagationBackground},
		},
		{
			name:   "all owners absent: delete in the background",
			refs:   []metav1.OwnerReference{ref("a", false), ref("b", false)},
			states: []ownerState{ownerAbsent, ownerAbsent},
			want:   verdict{Delete: true, Policy: metav1.DeletePropagationBackground},
		},
		{
			name:   "one of two owners absent: strip the dangling reference",
			refs:   []metav1.OwnerReference{ref("a", false), ref("b", false)},
			states: []ownerState{ownerSolid, ownerAbsent},
			want:   verdict{RemoveOwners: uids("b")},
		},
		{
			name:   "solid owner and one in foreground deletion: strip the waiting one",
			refs:   []metav1.OwnerReference{ref("a", true), ref("b", false), ref("c", false)},
			states: []ownerState{ownerWaiting, ownerSolid, ownerAbsent},
			want:   verdict{RemoveOwners: uids("a", "c")},
		},
		{
			name:   "blocking reference to a waiting owner: delete in the foreground",
			refs:   []metav1.OwnerReference{ref("a", true)},
			states: []ownerState{ownerWaiting},
			want:   verdict{Delete: true, Policy: metav1.DeletePropagationForeground},
		},
		{
			name:   "non-blocking reference to a waiting owner: delete in the background",
			refs:   []metav1.OwnerReference{ref("a", false)},
			states: []ownerState{ownerWaiting},
			want:   verdict{Delete: true, Policy: metav1.DeletePropagationBackground},
		},
		{
			name:   "waiting and absent owners, one blocking: delete in the foreground",
			refs:   []metav1.OwnerReference{ref("a", false), ref("b", true)},
			states: []ownerState{ownerAbsent, ownerWaiting},
			want:   verdict{Delete: true, Policy: metav1.DeletePropagationForeground},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := judge(tc.refs, tc.states)
			if got.Delete != tc.want.Delete || got.Policy != tc.want.Policy || !slices.Equal(got.RemoveOwners, tc.want.RemoveOwners) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestForegroundPlan(t *testing.T) {
	owner := foregroundDeleting(obj("o"))
	clusterOwner := owner
	clusterOwner.Namespace = ""
	going := func(o object) object { o.Deleting = true; return o }
	elsewhere := func(o object) object { o.Namespace = "other"; return o }
	tests := []struct {
		name        string
		owner       object
		deps        []object
		wantExamine []types.UID
		wantDone    bool
	}{
		{name: "no dependents: done", owner: owner, wantDone: true},
		{
			name:        "blocking dependent: wait and examine it",
			owner:       owner,
			deps:        []object{obj("d", ref("o", true))},
			wantExamine: uids("d"),
		},
		{
			name:        "only non-blocking dependents: done, still examine them",
			owner:       owner,
			deps:        []object{obj("d", ref("o", false))},
			wantExamine: uids("d"),
			wantDone:    true,
		},
		{
			name:  "blocking dependent already going: wait, nothing to examine",
			owner: owner,
			deps:  []object{going(obj("d", ref("o", true)))},
		},
		{
			name:     "blocking dependent in another namespace does not count",
			owner:    owner,
			deps:     []object{elsewhere(obj("d", ref("o", true)))},
			wantDone: true,
		},
		{
			name:        "cluster-scoped owner: dependents in any namespace count",
			owner:       clusterOwner,
			deps:        []object{elsewhere(obj("d", ref("o", true)))},
			wantExamine: uids("d"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			examine, done := foregroundPlan(tc.owner, tc.deps)
			if !slices.Equal(examine, tc.wantExamine) || done != tc.wantDone {
				t.Errorf("got examine %v done %v, want examine %v done %v", examine, done, tc.wantExamine, tc.wantDone)
			}
		})
	}
}
