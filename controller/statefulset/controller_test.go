package statefulset

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// harness runs the controller's sync by hand against a fake clientset,
// copying what the API holds into the informers' caches before each sync
// as a watch would, and playing the node agent: every pod runs and is
// ready once created, unless held back.
type harness struct {
	t       *testing.T
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	ctrl    *Controller
	events  *record.FakeRecorder
	// hold keeps these pods pending instead of running them.
	hold map[string]bool
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	h := &harness{t: t, client: fake.NewClientset(objs...), events: record.NewFakeRecorder(1000), hold: map[string]bool{}}
	h.factory = informers.NewSharedInformerFactory(h.client, 0)
	h.ctrl = New(h.client, h.factory, h.events, Options{Clock: clocktesting.NewFakeClock(now)})
	return h
}

// sync runs the agent, refreshes the caches and syncs web once.
func (h *harness) sync() {
	h.t.Helper()
	if err := h.trySync(); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
}

func (h *harness) trySync() error {
	h.runPods()
	h.refresh()
	return h.ctrl.sync(context.Background(), "default/web")
}

// runPods marks new pods running and ready, and finishes deleting those
// being deleted, as the agent would.
func (h *harness) runPods() {
	ctx := context.Background()
	pods, _ := h.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		if p.Status.Phase != "" || h.hold[p.Name] {
			continue
		}
		p.UID = types.UID("uid-" + p.Name + "-" + p.Labels[RevisionLabel])
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour)),
		}}}
		if _, err := h.client.CoreV1().Pods("default").Update(ctx, &p, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) refresh() {
	h.t.Helper()
	ctx := context.Background()
	sets, _ := h.client.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	pods, _ := h.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	revs, _ := h.client.AppsV1().ControllerRevisions("").List(ctx, metav1.ListOptions{})
	var setObjs, podObjs, revObjs []any
	for i := range sets.Items {
		setObjs = append(setObjs, &sets.Items[i])
	}
	for i := range pods.Items {
		podObjs = append(podObjs, &pods.Items[i])
	}
	for i := range revs.Items {
		revObjs = append(revObjs, &revs.Items[i])
	}
	apps := h.factory.Apps().V1()
	replace(h.t, apps.StatefulSets().Informer().GetIndexer(), setObjs)
	replace(h.t, h.factory.Core().V1().Pods().Informer().GetIndexer(), podObjs)
	replace(h.t, apps.ControllerRevisions().Informer().GetIndexer(), revObjs)
}

func replace(t *testing.T, idx cache.Indexer, objs []any) {
	if err := idx.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}

// podNames lists the pods in the API as "name@revision", by name.
func (h *harness) podNames() string {
	pods, _ := h.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name+"@"+h.revisionNumber(p.Labels[RevisionLabel]))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// revisionNumber turns a revision name into "rN", its number.
func (h *harness) revisionNumber(name string) string {
	rev, err := h.client.AppsV1().ControllerRevisions("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "?" + name
	}
	return "r" + string(rune('0'+rev.Revision))
}

func (h *harness) set() *appsv1.StatefulSet {
	set, err := h.client.AppsV1().StatefulSets("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return set
}

func (h *harness) deletePod(name string) {
	if err := h.client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// drainEvents returns the events recorded so far.
func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestControllerOrderedLifecycle(t *testing.T) {
	h := newHarness(t, statefulSet(3))
	for _, want := range []string{"web-0@r1", "web-0@r1 web-1@r1", "web-0@r1 web-1@r1 web-2@r1", "web-0@r1 web-1@r1 web-2@r1"} {
		h.sync()
		if got := h.podNames(); got != want {
			t.Fatalf("pods: got %q, want %q", got, want)
		}
	}
	wantEvents := []string{
		"Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful",
		"Normal SuccessfulCreate create Pod web-1 in StatefulSet web successful",
		"Normal SuccessfulCreate create Pod web-2 in StatefulSet web successful",
	}
	if got := h.drainEvents(); !slices.Equal(got, wantEvents) {
		t.Errorf("events: got %q, want %q", got, wantEvents)
	}
	h.sync() // the status write of the last sync
	st := h.set().Status
	if st.Replicas != 3 || st.ReadyReplicas != 3 || st.UpdatedReplicas != 3 || st.CurrentRevision == "" ||
		st.CurrentRevision != st.UpdateRevision || st.ObservedGeneration != 1 {
		t.Errorf("status: got %+v, want 3 replicas ready and updated at one revision", st)
	}

	// A deleted pod comes back under its name.
	h.deletePod("web-1")
	h.sync()
	if got, want := h.podNames(), "web-0@r1 web-1@r1 web-2@r1"; got != want {
		t.Errorf("after deleting web-1: got %q, want %q", got, want)
	}
}

func TestControllerScaleDown(t *testing.T) {
	h := newHarness(t, statefulSet(3))
	for range 4 {
		h.sync()
	}
	set := h.set()
	set.Spec.Replicas = ptr.To[int32](1)
	if _, err := h.client.AppsV1().StatefulSets("default").Update(context.Background(), set, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.drainEvents()
	for _, want := range []string{"web-0@r1 web-1@r1", "web-0@r1"} {
		h.sync()
		if got := h.podNames(); got != want {
			t.Fatalf("pods: got %q, want %q", got, want)
		}
	}
	wantEvents := []string{
		"Normal SuccessfulDelete delete Pod web-2 in StatefulSet web successful",
		"Normal SuccessfulDelete delete Pod web-1 in StatefulSet web successful",
	}
	if got := h.drainEvents(); !slices.Equal(got, wantEvents) {
		t.Errorf("events: got %q, want %q", got, wantEvents)
	}
}

func TestControllerRollingUpdate(t *testing.T) {
	h := newHarness(t, statefulSet(3, partition(1)))
	for range 4 {
		h.sync()
	}
	set := h.set()
	command("serve", "v2")(set)
	set.Generation = 2
	if _, err := h.client.AppsV1().StatefulSets("default").Update(context.Background(), set, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each outdated pod is deleted, then made again from revision 2,
	// from the highest ordinal down to the partition.
	steps := []string{
		"web-0@r1 web-1@r1", "web-0@r1 web-1@r1 web-2@r2",
		"web-0@r1 web-2@r2", "web-0@r1 web-1@r2 web-2@r2",
		"web-0@r1 web-1@r2 web-2@r2",
	}
	for _, want := range steps {
		h.sync()
		if got := h.podNames(); got != want {
			t.Fatalf("pods: got %q, want %q", got, want)
		}
	}
	st := h.set().Status
	if st.UpdatedReplicas != 2 || st.CurrentReplicas != 1 || st.CurrentRevision == st.UpdateRevision {
		t.Errorf("status at the partition: got %+v, want 2 updated and 1 current", st)
	}

	// Rolling back reuses revision 1 under a new number, as upstream.
	set = h.set()
	command("serve", "v1")(set)
	if _, err := h.client.AppsV1().StatefulSets("default").Update(context.Background(), set, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sync()
	revs, _ := h.client.AppsV1().ControllerRevisions("default").List(context.Background(), metav1.ListOptions{})
	if len(revs.Items) != 2 {
		t.Fatalf("got %d revisions, want 2", len(revs.Items))
	}
	for _, r := range revs.Items {
		if r.Name == h.set().Status.UpdateRevision && r.Revision != 3 {
			t.Errorf("rolled-back revision numbered %d, want 3", r.Revision)
		}
	}
}

func TestControllerAdoptsAndReleases(t *testing.T) {
	set := statefulSet(2)
	orphan := member(set, 0, "r0")
	orphan.OwnerReferences = nil
	stray := member(set, 1, "r0")
	stray.Labels["app"] = "other"
	h := newHarness(t, set, orphan, stray)
	// web-1 cannot be made while the stray pod holds its name.
	if err := h.trySync(); err == nil {
		t.Errorf("sync: got no error, want one for web-1's name being taken")
	}
	pods, _ := h.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: labels.Everything().String()})
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		switch p.Name {
		case "web-0":
			if ref == nil || ref.UID != set.UID {
				t.Errorf("web-0: got controller %v, want the set", ref)
			}
		case "web-1":
			if ref != nil {
				t.Errorf("web-1 with other labels: got controller %v, want none", ref)
			}
		}
	}
}

func TestControllerPrunesHistory(t *testing.T) {
	h := newHarness(t, statefulSet(1, func(s *appsv1.StatefulSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](1) }))
	for _, v := range []string{"v2", "v3", "v4"} {
		h.sync()
		h.sync()
		set := h.set()
		command("serve", v)(set)
		if _, err := h.client.AppsV1().StatefulSets("default").Update(context.Background(), set, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		h.sync()
	}
	revs, _ := h.client.AppsV1().ControllerRevisions("default").List(context.Background(), metav1.ListOptions{})
	// The live revision and one more.
	if len(revs.Items) != 2 {
		t.Errorf("got %d revisions, want 2", len(revs.Items))
	}
}

func TestControllerParallelCreatesInSlowStart(t *testing.T) {
	h := newHarness(t, statefulSet(5, parallel))
	h.sync()
	if got, want := h.podNames(), "web-0@r1 web-1@r1 web-2@r1 web-3@r1 web-4@r1"; got != want {
		t.Errorf("pods: got %q, want %q", got, want)
	}

	// A template the API server refuses costs one failed create.
	refused := newHarness(t, statefulSet(5, parallel))
	refused.client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), "web-0", nil)
	})
	if err := refused.trySync(); err == nil {
		t.Fatal("sync: got no error, want the refused create")
	}
	events := refused.drainEvents()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning FailedCreate create Pod web-0 in StatefulSet web failed error:") {
		t.Errorf("events: got %q, want one FailedCreate for web-0", events)
	}
}

// A set with a selector the API server would refuse gets an event and no
// pods, never a retry loop.
func TestControllerRefusesEmptySelector(t *testing.T) {
	h := newHarness(t, statefulSet(3, func(s *appsv1.StatefulSet) { s.Spec.Selector = &metav1.LabelSelector{} }))
	h.sync()
	if got := h.podNames(); got != "" {
		t.Errorf("pods: got %q, want none", got)
	}
	want := []string{"Warning InvalidSelector invalid selector: empty selector would select every pod"}
	if got := h.drainEvents(); !slices.Equal(got, want) {
		t.Errorf("events: got %q, want %q", got, want)
	}
}
