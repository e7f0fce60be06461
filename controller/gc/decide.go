package gc

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerState is what one owner reference of a dependent points at.
type ownerState int

const (
	// ownerSolid: the owner exists and is not deleting its dependents.
	ownerSolid ownerState = iota
	// ownerAbsent: no such owner, or one that may not own the dependent
	// (another namespace, or a namespaced owner of a cluster-scoped object).
	ownerAbsent
	// ownerWaiting: the owner exists and waits, in foreground deletion, for
	// its dependents to go.
	ownerWaiting
)

func (s ownerState) String() string {
	switch s {
	case ownerSolid:
		return "solid"
	case ownerAbsent:
		return "absent"
	case ownerWaiting:
		return "waiting"
	}
	return "unknown"
}

// verdict is what to do with a dependent: nothing, strip some owner
// references, or delete it.
type verdict struct {
	Delete       bool
	Policy       metav1.DeletionPropagation
	RemoveOwners []types.UID
}

// judge decides the fate of a dependent from the states of its owners,
// states[i] being that of refs[i]:
//   - with a solid owner it stays, and references to absent owners and to
//     owners in foreground deletion are stripped (the latter so those owners
//     do not wait for an object that is not going);
//   - with an owner in foreground deletion and no solid one it is deleted,
//     in the foreground when a waiting owner's reference blocks, so that
//     owner also waits for the dependent's own dependents;
//   - with only absent owners it is deleted in the background.
func judge(refs []metav1.OwnerReference, states []ownerState) verdict {
	var solid, blocking bool
	var stale []types.UID
	for i, r := range refs {
		switch states[i] {
		case ownerSolid:
			solid = true
		case ownerWaiting:
			stale = append(stale, r.UID)
			blocking = blocking || r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
		case ownerAbsent:
			stale = append(stale, r.UID)
		}
	}
	switch {
	case len(refs) == 0:
		return verdict{}
	case solid:
		return verdict{RemoveOwners: stale}
	case blocking:
		return verdict{Delete: true, Policy: metav1.DeletePropagationForeground}
	}
	return verdict{Delete: true, Policy: metav1.DeletePropagationBackground}
}

// foregroundPlan looks at an owner in foreground deletion and the observed
// objects that name it. It returns the dependents to examine (those not yet
// going; judge deletes them) and whether the owner may go now, which is
// when no valid dependent with blockOwnerDeletion is left.
func foregroundPlan(owner object, deps []object) (examine []types.UID, done bool) {
	done = true
	for _, d := range deps {
		if !d.mayBeOwnedBy(owner.Namespace) {
			continue
		}
		if d.blocks(owner.UID) {
			done = false
		}
		if !d.Deleting {
			examine = append(examine, d.UID)
		}
	}
	return examine, done
}
