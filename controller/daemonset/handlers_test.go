package daemonset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A Node turning Ready is when its daemon Pods may start: the DaemonSets
// must be synced then, with nothing else about the Node changed.
func TestNodeTurningReadyQueuesDaemonSets(t *testing.T) {
	s := newStale(t, mkDS())
	s.c.onNodeUpdate(mkNode("n1", notReady), mkNode("n1"))
	if got := s.c.loop.Len(); got != 1 {
		t.Fatalf("queued keys: got %d, want 1", got)
	}
}

// Regression: the Pod handlers took any Pod naming a DaemonSet's name as
// its own. A DaemonSet deleted and re-created under the same name must
// not count the old one's Pods against its expectations.
func TestOldDaemonSetsPodsNotCounted(t *testing.T) {
	s := newStale(t, mkDS(func(ds *appsv1.DaemonSet) { ds.UID = "new-uid" }))
	s.c.exp.Expect(dsKey, 1, nil)
	s.c.podEvents.OnAdd(mkPod("old", "n1", "h", 0)) // controlled by "ds-uid"
	if adds, _ := s.c.exp.Pending(dsKey); adds != 1 {
		t.Fatalf("creations pending: got %d, want 1", adds)
	}
}

// Regression: a Pod first seen already being deleted (after a relist)
// was counted as a creation and its deletion never seen.
func TestPodAddedWhileDeletingCountsAsDeletion(t *testing.T) {
	s := newStale(t, mkDS())
	pod := mkPod("p", "n1", "h", 0, deleting)
	s.c.exp.Expect(dsKey, 1, []types.UID{pod.UID})
	s.c.podEvents.OnAdd(pod)
	if adds, dels := s.c.exp.Pending(dsKey); adds != 1 || dels != 0 {
		t.Fatalf("pending: got %d adds, %d dels, want 1, 0", adds, dels)
	}
}

// Regression: a Pod whose controller reference was removed was not
// offered to the DaemonSets selecting it, so none adopted it until some
// other event.
func TestReleasedPodQueuesSelectingDaemonSets(t *testing.T) {
	other := mkDS(func(ds *appsv1.DaemonSet) { ds.Name, ds.UID = "other", "other-uid" })
	s := newStale(t, mkDS(), other)
	owned := mkPod("p", "n1", "h", 0)
	owned.ResourceVersion = "1"
	released := owned.DeepCopy()
	released.ResourceVersion = "2"
	released.OwnerReferences = nil
	s.c.podEvents.OnUpdate(owned, released)
	if got := s.c.loop.Len(); got != 2 {
		t.Fatalf("queued keys: got %d, want 2 (the old owner and the other selecting set)", got)
	}
}

func TestDaemonSetRecreatedDropsExpectations(t *testing.T) {
	old := mkDS()
	s := newStale(t, old)
	s.c.exp.Expect(dsKey, 2, nil)
	s.c.onDaemonSetUpdate(old, mkDS(func(ds *appsv1.DaemonSet) { ds.UID = "new-uid" }))
	if !s.c.exp.Satisfied(dsKey) {
		t.Fatalf("got the old DaemonSet's expectations, want none")
	}
}
