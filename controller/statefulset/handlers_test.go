package statefulset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestPodEventsQueueSets(t *testing.T) {
	set := statefulSet(3)
	owned := member(set, 0, "r1")
	orphan := member(set, 1, "r1", func(p *corev1.Pod) { p.OwnerReferences = nil })
	otherName := member(set, 1, "r1", func(p *corev1.Pod) { p.OwnerReferences, p.Name = nil, "db-1" })
	otherLabels := member(set, 1, "r1", func(p *corev1.Pod) { p.OwnerReferences, p.Labels = nil, map[string]string{"app": "x"} })
	foreign := member(set, 2, "r1", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", UID: "uid-rs", Controller: new(true)}}
	})
	stale := member(set, 2, "r1", func(p *corev1.Pod) { p.OwnerReferences[0].UID = "uid-old-web" })
	tests := []struct {
		name    string
		pod     any
		deleted bool
		want    int
	}{
		{"an owned pod queues its set", owned, false, 1},
		{"a deleted owned pod seen late queues its set", cache.DeletedFinalStateUnknown{Key: "default/web-0", Obj: owned}, true, 1},
		{"an orphan with the set's name and labels queues it", orphan, false, 1},
		{"an orphan with another name does not", otherName, false, 0},
		{"an orphan with other labels does not", otherLabels, false, 0},
		{"a pod another kind controls does not", foreign, false, 0},
		{"a pod of an earlier set of that name does not", stale, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, set)
			h.refresh()
			if tc.deleted {
				h.ctrl.podEvents.OnDelete(tc.pod)
			} else {
				h.ctrl.podEvents.OnAdd(tc.pod)
			}
			if got := h.ctrl.loop.Len(); got != tc.want {
				t.Errorf("got %d keys queued, want %d", got, tc.want)
			}
		})
	}
}

func TestPodUpdateQueuesOldAndNewOwner(t *testing.T) {
	set := statefulSet(3)
	old := member(set, 0, "r1")
	old.ResourceVersion = "1"
	released := old.DeepCopy()
	released.ResourceVersion, released.OwnerReferences = "2", nil
	released.Labels["app"] = "x"
	h := newHarness(t, set)
	h.refresh()
	h.ctrl.podEvents.OnUpdate(old, old)
	if got := h.ctrl.loop.Len(); got != 0 {
		t.Errorf("resync: got %d keys queued, want 0", got)
	}
	h.ctrl.podEvents.OnUpdate(old, released)
	if got := h.ctrl.loop.Len(); got != 1 {
		t.Errorf("released pod: got %d keys queued, want the old owner", got)
	}
}
