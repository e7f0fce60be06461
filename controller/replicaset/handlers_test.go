package replicaset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func TestEventsLowerExpectations(t *testing.T) {
	h := newHarness(t, replicaSet(2))
	e := h.ctrl.expectations
	p := pod("a", epoch)

	e.ExpectCreations("ns/web", 2)
	h.ctrl.podEvents.OnAdd(p)
	if adds, _ := e.Pending("ns/web"); adds != 1 {
		t.Errorf("after an owned Pod's add: got %d creations pending, want 1", adds)
	}
	other := pod("b", epoch, func(p *corev1.Pod) { p.OwnerReferences[0].UID = "someone-else" })
	h.ctrl.podEvents.OnAdd(other)
	if adds, _ := e.Pending("ns/web"); adds != 1 {
		t.Errorf("after another owner's Pod: got %d creations pending, want 1", adds)
	}

	e.ExpectDeletions("ns/web", []types.UID{p.UID})
	going := p.DeepCopy()
	going.ResourceVersion = "2"
	now := metav1.NewTime(epoch)
	going.DeletionTimestamp = &now
	h.ctrl.podEvents.OnUpdate(p, going)
	if _, dels := e.Pending("ns/web"); dels != 0 {
		t.Errorf("after the Pod was marked for deletion: got %d deletions pending, want 0", dels)
	}

	e.ExpectDeletions("ns/web", []types.UID{"uid-c"})
	h.ctrl.podEvents.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: pod("c", epoch)})
	if _, dels := e.Pending("ns/web"); dels != 0 {
		t.Errorf("after a missed delete: got %d deletions pending, want 0", dels)
	}
}

func TestReplicaSetRecreatedDropsExpectations(t *testing.T) {
	old := replicaSet(2)
	h := newHarness(t, old)
	h.ctrl.expectations.ExpectCreations("ns/web", 2)
	recreated := replicaSet(2, func(rs *appsv1.ReplicaSet) { rs.UID = "new-uid" })
	h.ctrl.onReplicaSetUpdate(old, recreated)
	if !h.ctrl.expectations.Satisfied("ns/web") {
		t.Errorf("got the old ReplicaSet's expectations, want none")
	}
}

func TestOrphanQueuesMatchingReplicaSets(t *testing.T) {
	other := replicaSet(1, func(rs *appsv1.ReplicaSet) {
		rs.Name, rs.UID = "db", "db-uid"
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	})
	h := newHarness(t, replicaSet(1), other)
	h.ctrl.podEvents.OnAdd(pod("orphan", epoch, orphan))
	if got := h.ctrl.loop.Len(); got != 1 {
		t.Errorf("queued keys: got %d, want 1 (web only)", got)
	}
}
