package replicaset

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

func TestCreatesReplicasAndReportsThem(t *testing.T) {
	h := newHarness(t, replicaSet(3))
	h.mustSync()
	if got := h.pods(); len(got) != 3 {
		t.Fatalf("pods: got %v, want 3", got)
	}
	if got, want := h.events(), []string{"Normal SuccessfulCreate", "Normal SuccessfulCreate", "Normal SuccessfulCreate"}; !slices.Equal(got, want) {
		t.Errorf("events: got %v, want %v", got, want)
	}
	h.catchUp()
	h.mustSync()
	st := h.rs().Status
	if st.Replicas != 3 || st.FullyLabeledReplicas != 3 || st.ReadyReplicas != 0 || st.ObservedGeneration != 1 {
		t.Errorf("status: got %+v, want 3 replicas, 3 fully labeled, 0 ready, generation 1", st)
	}
	p, _ := h.client.CoreV1().Pods("ns").Get(context.Background(), h.pods()[0], metav1.GetOptions{})
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "rs-uid" || p.Labels["tier"] != "front" {
		t.Errorf("pod: got owner %v labels %v, want controlled by rs-uid with the template's labels", ref, p.Labels)
	}
}

// A watch slower than the controller must never make it create the same
// Pods twice: until the informer shows its creates, it waits.
func TestSlowWatchNeverCreatesTwice(t *testing.T) {
	h := newHarness(t, replicaSet(3))
	h.mustSync()
	h.mustSync() // the cache still shows no Pods
	h.mustSync()
	if got := h.creates(); got != 3 {
		t.Fatalf("creates with a lagging cache: got %d, want 3", got)
	}
	h.catchUp()
	h.mustSync()
	if got := h.pods(); len(got) != 3 {
		t.Errorf("pods: got %v, want 3", got)
	}
}

func TestSlowWatchNeverDeletesTwice(t *testing.T) {
	h := newHarness(t, replicaSet(1), pod("a", epoch), pod("b", epoch), pod("c", epoch))
	h.mustSync()
	h.mustSync() // the cache still shows three
	if got := h.pods(); len(got) != 1 {
		t.Fatalf("pods with a lagging cache: got %v, want 1", got)
	}
	h.catchUp()
	h.mustSync()
	if got := h.pods(); len(got) != 1 {
		t.Errorf("pods: got %v, want 1", got)
	}
}

// A template the API server rejects costs one create per sync, not
// spec.replicas of them, and says why on the ReplicaSet.
func TestBrokenTemplateFailsOnce(t *testing.T) {
	h := newHarness(t, replicaSet(500))
	h.client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "", nil)
	})
	if err := h.sync(); err == nil {
		t.Fatalf("sync: got no error, want the create's")
	}
	if got := h.creates(); got != 1 {
		t.Errorf("creates: got %d, want 1", got)
	}
	if got, want := h.events(), []string{"Warning FailedCreate"}; !slices.Equal(got, want) {
		t.Errorf("events: got %v, want %v", got, want)
	}
	cond := failureCondition(h.rs().Status)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "FailedCreate" {
		t.Errorf("ReplicaFailure: got %+v, want True FailedCreate", cond)
	}
	// Failed creates never show in the informer: the retry must not wait
	// for them.
	_ = h.sync()
	if got := h.creates(); got != 2 {
		t.Errorf("creates after the retry: got %d, want 2", got)
	}
	h.client.ReactionChain = h.client.ReactionChain[1:] // the template is fixed
	h.mustSync()
	if cond := failureCondition(h.rs().Status); cond != nil {
		t.Errorf("ReplicaFailure after a good sync: got %+v, want none", cond)
	}
}

// A create that times out may have happened: the controller keeps
// expecting its Pod rather than risk one too many.
func TestTimedOutCreateIsStillExpected(t *testing.T) {
	h := newHarness(t, replicaSet(1))
	h.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.Name, pod.UID = "web-late", "uid-web-late"
		if err := h.client.Tracker().Add(pod); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewTimeoutError("create", 1)
	})
	_ = h.sync()
	h.client.ReactionChain = h.client.ReactionChain[1:]
	_ = h.sync()
	if got := h.pods(); !slices.Equal(got, []string{"web-late"}) {
		t.Errorf("pods: got %v, want [web-late]", got)
	}
}

func TestScaleDownDeletesNotReadyFirst(t *testing.T) {
	h := newHarness(t, replicaSet(2),
		pod("ready-long", epoch), pod("not-ready", time.Time{}),
		pod("ready-recently", epoch.Add(30*time.Minute)),
		pod("unscheduled", time.Time{}, func(p *corev1.Pod) { p.Spec.NodeName = ""; p.Status.Phase = corev1.PodPending }))
	h.mustSync()
	if got, want := h.pods(), []string{"ready-long", "ready-recently"}; !slices.Equal(got, want) {
		t.Errorf("pods: got %v, want %v", got, want)
	}
	if got, want := h.events(), []string{"Normal SuccessfulDelete", "Normal SuccessfulDelete"}; !slices.Equal(got, want) {
		t.Errorf("events: got %v, want %v", got, want)
	}
}

func TestTerminatingPodsAreReplaced(t *testing.T) {
	gone := metav1.NewTime(epoch)
	h := newHarness(t, replicaSet(2), pod("a", epoch), pod("b", epoch, func(p *corev1.Pod) { p.DeletionTimestamp = &gone }))
	h.mustSync()
	if got := h.creates(); got != 1 {
		t.Errorf("creates: got %d, want 1", got)
	}
}

func TestAdoptsOrphansAndReleasesStrays(t *testing.T) {
	stray := pod("stray", epoch, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} })
	h := newHarness(t, replicaSet(2), pod("owned", epoch), pod("orphan", epoch, orphan), stray)
	h.mustSync()
	if got := h.creates(); got != 0 {
		t.Errorf("creates: got %d, want 0 (the orphan makes two)", got)
	}
	for name, want := range map[string]bool{"owned": true, "orphan": true, "stray": false} {
		p, err := h.client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := metav1.IsControlledBy(p, h.rs()); got != want {
			t.Errorf("%s controlled by the ReplicaSet: got %v, want %v", name, got, want)
		}
	}
}

func TestNoAdoptionOnceDeleted(t *testing.T) {
	now := metav1.NewTime(epoch)
	h := newHarness(t, replicaSet(2, func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = &now }), pod("orphan", epoch, orphan))
	h.mustSync()
	if got := h.creates(); got != 0 {
		t.Errorf("creates: got %d, want 0", got)
	}
	p, _ := h.client.CoreV1().Pods("ns").Get(context.Background(), "orphan", metav1.GetOptions{})
	if len(p.OwnerReferences) != 0 {
		t.Errorf("orphan: got owners %v, want none", p.OwnerReferences)
	}
}

func TestAvailabilityWaitsForMinReadySeconds(t *testing.T) {
	now := epoch.Add(time.Hour)
	h := newHarness(t, replicaSet(2, func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = 60 }),
		pod("long", now.Add(-2*time.Minute)), pod("recent", now.Add(-10*time.Second)))
	h.mustSync()
	st := h.rs().Status
	if st.ReadyReplicas != 2 || st.AvailableReplicas != 1 {
		t.Errorf("status: got ready %d available %d, want 2 and 1", st.ReadyReplicas, st.AvailableReplicas)
	}
	h.catchUp()
	h.clock.Step(time.Minute)
	h.mustSync()
	if st := h.rs().Status; st.AvailableReplicas != 2 {
		t.Errorf("a minute later: got available %d, want 2", st.AvailableReplicas)
	}
}

func TestFailedDeleteIsRetried(t *testing.T) {
	h := newHarness(t, replicaSet(0), pod("a", epoch))
	h.client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd unavailable")
	})
	if err := h.sync(); err == nil {
		t.Fatalf("sync: got no error, want the delete's")
	}
	if c := failureCondition(h.rs().Status); c == nil || c.Reason != "FailedDelete" {
		t.Errorf("ReplicaFailure: got %+v, want FailedDelete", c)
	}
	h.client.ReactionChain = h.client.ReactionChain[1:]
	h.catchUp()
	h.mustSync()
	if got := h.pods(); len(got) != 0 {
		t.Errorf("pods after the retry: got %v, want none", got)
	}
}

// At 1,000 replicas the count stays exact through a lagging cache and a
// restart of the controller: a restarted controller has no expectations,
// but its informer's first list shows every Pod the last one created.
func TestThousandReplicasStayExact(t *testing.T) {
	h := newHarness(t, replicaSet(1000))
	_ = h.sync() // one burst
	_ = h.sync() // the cache has not caught up: nothing more
	if got := len(h.pods()); got != burstReplicas {
		t.Fatalf("pods before the cache catches up: got %d, want %d", got, burstReplicas)
	}
	restarted := newHarness(t, objects(t, h)...)
	restarted.mustSync()
	if got := len(restarted.pods()); got != 1000 {
		t.Errorf("pods after the restart: got %d, want 1000", got)
	}
	restarted.catchUp()
	restarted.mustSync()
	if got := len(restarted.pods()); got != 1000 {
		t.Errorf("pods at rest: got %d, want 1000", got)
	}
	if st := restarted.rs().Status; st.Replicas != 1000 {
		t.Errorf("status.replicas: got %d, want 1000", st.Replicas)
	}
}

func objects(t *testing.T, h *harness) []runtime.Object {
	out := []runtime.Object{h.rs()}
	list, err := h.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

// On a scale-down the Pod sharing its node with more Pods of the
// Deployment's ReplicaSets goes first, so what is left spreads out.
func TestScaleDownSpreadsAcrossNodes(t *testing.T) {
	deploy := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "d-uid", Controller: ptrTrue()}
	web := replicaSet(1, func(rs *appsv1.ReplicaSet) { rs.OwnerReferences = []metav1.OwnerReference{deploy} })
	old := replicaSet(1, func(rs *appsv1.ReplicaSet) {
		rs.Name, rs.UID, rs.OwnerReferences = "web-old", "old-uid", []metav1.OwnerReference{deploy}
	})
	oldPod := pod("old-0", epoch, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(old, kind)}
		p.Labels = map[string]string{"app": "old"}
	})
	onNode2 := func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }
	h := newHarness(t, web, old, oldPod, pod("crowded", epoch), pod("alone", epoch, onNode2))
	h.mustSync()
	if got, want := h.pods(), []string{"alone", "old-0"}; !slices.Equal(got, want) {
		t.Errorf("pods: got %v, want %v", got, want)
	}
}

func ptrTrue() *bool { t := true; return &t }
