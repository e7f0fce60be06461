package workload

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// handlerPod is a Pod at resource version rv, controlled by the ReplicaSet
// with UID owner ("" for an orphan), labelled app=web.
func handlerPod(rv, owner string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "p", UID: "pod-uid", ResourceVersion: rv,
		Labels: map[string]string{"app": "web"},
	}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{
			Kind: "ReplicaSet", Name: "web", UID: types.UID(owner), Controller: new(true),
		}}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func deletingPod(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}

func relabelled(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }

// TestPodHandlers: each event queues the Pod's owner or, for an orphan,
// the ReplicaSets selecting it, and lowers the owner's expectations by
// what it shows. ns/web expects one creation and the Pod's deletion
// before each case.
func TestPodHandlers(t *testing.T) {
	owners := testOwners(
		ownerRS("web", "web-uid", map[string]string{"app": "web"}),
		ownerRS("db", "db-uid", map[string]string{"app": "db"}),
	)
	cases := []struct {
		name        string
		event       func(PodHandlers)
		wantQueued  []string
		wantAdds    int // creations of ns/web still expected
		wantDels    int // deletions of ns/web still expected
		wantChecked bool
	}{
		{
			name:       "an owned Pod added",
			event:      func(h PodHandlers) { h.OnAdd(handlerPod("1", "web-uid")) },
			wantQueued: []string{"ns/web"}, wantDels: 1,
		},
		{
			name:     "a Pod of an earlier ReplicaSet of that name added",
			event:    func(h PodHandlers) { h.OnAdd(handlerPod("1", "old-uid")) },
			wantAdds: 1, wantDels: 1,
		},
		{
			name:       "a Pod first seen being deleted is a deletion",
			event:      func(h PodHandlers) { h.OnAdd(handlerPod("1", "web-uid", deletingPod)) },
			wantQueued: []string{"ns/web"}, wantAdds: 1,
		},
		{
			name:       "an orphan added queues the ReplicaSets selecting it",
			event:      func(h PodHandlers) { h.OnAdd(handlerPod("1", "")) },
			wantQueued: []string{"ns/web"}, wantAdds: 1, wantDels: 1,
		},
		{
			name:     "a resync",
			event:    func(h PodHandlers) { h.OnUpdate(handlerPod("1", "web-uid"), handlerPod("1", "web-uid")) },
			wantAdds: 1, wantDels: 1,
		},
		{
			name:       "an owned Pod changed",
			event:      func(h PodHandlers) { h.OnUpdate(handlerPod("1", "web-uid"), handlerPod("2", "web-uid")) },
			wantQueued: []string{"ns/web"}, wantAdds: 1, wantDels: 1,
			wantChecked: true,
		},
		{
			name: "a Pod marked for deletion counts as deleted",
			event: func(h PodHandlers) {
				h.OnUpdate(handlerPod("1", "web-uid"), handlerPod("2", "web-uid", deletingPod))
			},
			wantQueued: []string{"ns/web"}, wantAdds: 1,
		},
		{
			name:       "a released Pod queues its old owner and those selecting it",
			event:      func(h PodHandlers) { h.OnUpdate(handlerPod("1", "web-uid"), handlerPod("2", "", relabelled)) },
			wantQueued: []string{"ns/web", "ns/db"}, wantAdds: 1, wantDels: 1,
		},
		{
			name:       "a relabelled orphan queues those selecting it now",
			event:      func(h PodHandlers) { h.OnUpdate(handlerPod("1", ""), handlerPod("2", "", relabelled)) },
			wantQueued: []string{"ns/db"}, wantAdds: 1, wantDels: 1,
		},
		{
			name:     "an orphan's status changed",
			event:    func(h PodHandlers) { h.OnUpdate(handlerPod("1", ""), handlerPod("2", "")) },
			wantAdds: 1, wantDels: 1,
		},
		{
			name: "a missed delete",
			event: func(h PodHandlers) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: handlerPod("1", "web-uid")})
			},
			wantQueued: []string{"ns/web"}, wantAdds: 1,
		},
		{
			name:     "an orphan deleted",
			event:    func(h PodHandlers) { h.OnDelete(handlerPod("1", "")) },
			wantAdds: 1, wantDels: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := &Expectations{}
			exp.Expect("ns/web", 1, []types.UID{"pod-uid"})
			var queued []string
			h := owners.PodHandlers(func(key string) { queued = append(queued, key) }, exp)
			checked := false
			h.OwnedUpdate = func(string, *corev1.Pod, *corev1.Pod) { checked = true }
			tc.event(h)
			if !slices.Equal(queued, tc.wantQueued) {
				t.Errorf("queued: got %v, want %v", queued, tc.wantQueued)
			}
			if adds, dels := exp.Pending("ns/web"); adds != tc.wantAdds || dels != tc.wantDels {
				t.Errorf("pending: got %d creations, %d deletions, want %d, %d", adds, dels, tc.wantAdds, tc.wantDels)
			}
			if checked != tc.wantChecked {
				t.Errorf("OwnedUpdate called: got %v, want %v", checked, tc.wantChecked)
			}
		})
	}
}
