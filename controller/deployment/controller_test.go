package deployment

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"

	"portal.dev/portal/controller/internal/workload/workloadtest"
)

var epoch = workloadtest.Epoch

// harness drives a Controller's sync by hand over a fake clientset, with
// informer caches that catch up with the API server when the test says.
type harness struct {
	t        *testing.T
	client   *fake.Clientset
	ctrl     *Controller
	recorder *record.FakeRecorder
	clock    *testclock.FakeClock
	dCache   cache.Indexer
	rsCache  cache.Indexer
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	client := fake.NewClientset(objs...)
	clk := testclock.NewFakeClock(epoch.Add(time.Hour))
	// The fake API server gives objects neither UIDs nor creation times;
	// the real one does both.
	workloadtest.OnCreate(client, "replicasets", func(r metav1.Object) {
		r.SetUID(types.UID("uid-" + r.GetName()))
		r.SetCreationTimestamp(metav1.NewTime(clk.Now()))
		clk.Step(time.Second)
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(1000)
	h := &harness{
		t: t, client: client, recorder: rec, clock: clk,
		ctrl:    New(client, factory, rec, Options{Clock: clk}),
		dCache:  factory.Apps().V1().Deployments().Informer().GetIndexer(),
		rsCache: factory.Apps().V1().ReplicaSets().Informer().GetIndexer(),
	}
	h.catchUp()
	return h
}

// catchUp makes the caches what the API server holds.
func (h *harness) catchUp() {
	h.t.Helper()
	ctx := context.Background()
	ds, err := h.client.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	workloadtest.CatchUp(h.t, h.dCache, ds.Items, nil)
	rss, err := h.client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	workloadtest.CatchUp(h.t, h.rsCache, rss.Items, nil)
}

// sync catches the caches up, then syncs ns/web.
func (h *harness) sync() {
	h.t.Helper()
	h.catchUp()
	if err := h.ctrl.sync(context.Background(), "ns/web"); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
}

func (h *harness) deployment() *appsv1.Deployment {
	h.t.Helper()
	d, err := h.client.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// sizes returns "name=replicas" of the ReplicaSets, sorted by name.
func (h *harness) sizes() []string {
	h.t.Helper()
	rss, err := h.client.AppsV1().ReplicaSets("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, r := range rss.Items {
		out = append(out, r.Name+"="+itoa(replicas(&r)))
	}
	slices.Sort(out)
	return out
}

// settle plays the ReplicaSet controller and the kubelets: every
// ReplicaSet reports its spec.replicas as available Pods.
func (h *harness) settle() {
	h.t.Helper()
	ctx := context.Background()
	rss, _ := h.client.AppsV1().ReplicaSets("ns").List(ctx, metav1.ListOptions{})
	for i := range rss.Items {
		r := &rss.Items[i]
		n := replicas(r)
		r.Status = appsv1.ReplicaSetStatus{Replicas: n, ReadyReplicas: n, AvailableReplicas: n, ObservedGeneration: r.Generation}
		if _, err := h.client.AppsV1().ReplicaSets("ns").UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) events() []string { return workloadtest.Events(h.recorder) }

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func web(replicas int32, image string) *appsv1.Deployment {
	d := rolling("web", replicas, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Template = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
	return d
}

func TestNewDeploymentCreatesReplicaSet(t *testing.T) {
	h := newHarness(t, web(3, "v1"))
	h.sync()
	rss, _ := h.client.AppsV1().ReplicaSets("ns").List(context.Background(), metav1.ListOptions{})
	if len(rss.Items) != 1 {
		t.Fatalf("got %d ReplicaSets, want 1", len(rss.Items))
	}
	r := rss.Items[0]
	hash := r.Labels[hashLabel]
	if hash == "" || r.Name != "web-"+hash {
		t.Errorf("name %q, labels %v: want web-<pod-template-hash> with the hash label", r.Name, r.Labels)
	}
	if r.Spec.Selector.MatchLabels[hashLabel] != hash || r.Spec.Template.Labels[hashLabel] != hash {
		t.Errorf("selector %v, template labels %v: want the hash label in both", r.Spec.Selector.MatchLabels, r.Spec.Template.Labels)
	}
	if replicas(&r) != 3 {
		t.Errorf("replicas: got %d, want 3", replicas(&r))
	}
	want := map[string]string{RevisionAnnotation: "1", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "4"}
	for k, v := range want {
		if r.Annotations[k] != v {
			t.Errorf("annotation %s: got %q, want %q", k, r.Annotations[k], v)
		}
	}
	if ref := metav1.GetControllerOf(&r); ref == nil || ref.Kind != "Deployment" || ref.Name != "web" {
		t.Errorf("controller reference: got %+v, want Deployment web", ref)
	}
	d := h.deployment()
	if d.Annotations[RevisionAnnotation] != "1" {
		t.Errorf("deployment revision: got %q, want 1", d.Annotations[RevisionAnnotation])
	}
	if c := getCondition(d.Status, progressing); c == nil || c.Reason != reasonNewRSCreated {
		t.Errorf("Progressing: got %+v, want reason %s", c, reasonNewRSCreated)
	}
	if ev := h.events(); len(ev) != 1 || ev[0] != "Normal ScalingReplicaSet Scaled up replica set "+r.Name+" from 0 to 3" {
		t.Errorf("events: got %q, want one ScalingReplicaSet up from 0 to 3", ev)
	}
}

// TestRollingUpdateSteps walks a rollout with maxSurge 1 and
// maxUnavailable 0: never more than 4 Pods, never fewer than 3 available.
func TestRollingUpdateSteps(t *testing.T) {
	h := newHarness(t, web(3, "v1"))
	h.sync()
	h.settle()
	h.sync()
	if c := getCondition(h.deployment().Status, progressing); c == nil || c.Reason != reasonNewRSAvailable {
		t.Fatalf("after the first rollout, Progressing: got %+v, want %s", c, reasonNewRSAvailable)
	}
	d := h.deployment()
	d.Spec.Template.Spec.Containers[0].Image = "v2"
	d.Generation++
	if _, err := h.client.AppsV1().Deployments("ns").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	oldName := h.sizes()[0][:strings.Index(h.sizes()[0], "=")]
	var steps [][]string
	for range 10 {
		h.sync()
		steps = append(steps, h.sizes())
		h.settle()
	}
	for i, s := range steps {
		total := int32(0)
		for _, e := range s {
			n, _ := strconv.Atoi(e[strings.Index(e, "=")+1:])
			total += int32(n)
		}
		if total > 4 {
			t.Errorf("step %d: %v, more than replicas + maxSurge = 4", i, s)
		}
	}
	final := h.sizes()
	if !slices.Contains(final, oldName+"=0") || len(final) != 2 {
		t.Errorf("after the rollout: got %v, want the old ReplicaSet at 0 and the new at 3", final)
	}
	d = h.deployment()
	if d.Annotations[RevisionAnnotation] != "2" || d.Status.UpdatedReplicas != 3 || d.Status.AvailableReplicas != 3 {
		t.Errorf("deployment: revision %q, status %+v; want revision 2, 3 updated and available", d.Annotations[RevisionAnnotation], d.Status)
	}
	if c := getCondition(d.Status, progressing); c == nil || c.Reason != reasonNewRSAvailable {
		t.Errorf("Progressing: got %+v, want %s", c, reasonNewRSAvailable)
	}
}

func TestPausedDeploymentDoesNotRollOut(t *testing.T) {
	d := web(3, "v1")
	d.Spec.Paused = true
	h := newHarness(t, d)
	h.sync()
	if got := h.sizes(); len(got) != 0 {
		t.Errorf("ReplicaSets: got %v, want none while paused", got)
	}
	if c := getCondition(h.deployment().Status, progressing); c == nil || c.Reason != reasonPaused {
		t.Errorf("Progressing: got %+v, want %s", c, reasonPaused)
	}
}

func TestProgressDeadlineExceeded(t *testing.T) {
	d := web(3, "v1")
	d.Spec.ProgressDeadlineSeconds = new(int32)
	*d.Spec.ProgressDeadlineSeconds = 30
	h := newHarness(t, d)
	h.sync() // creates the ReplicaSet; its Pods never become available
	h.sync()
	if c := getCondition(h.deployment().Status, progressing); c == nil || c.Reason == reasonTimedOut {
		t.Fatalf("before the deadline, Progressing: got %+v, want not timed out", c)
	}
	h.clock.Step(31 * time.Second)
	h.sync()
	c := getCondition(h.deployment().Status, progressing)
	if c == nil || c.Reason != reasonTimedOut || c.Status != corev1.ConditionFalse {
		t.Errorf("after the deadline, Progressing: got %+v, want False %s", c, reasonTimedOut)
	}
}

func TestRecreateScalesOldDownFirst(t *testing.T) {
	d := web(2, "v1")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	h := newHarness(t, d)
	h.sync()
	h.settle()
	h.sync()
	d = h.deployment()
	d.Spec.Template.Spec.Containers[0].Image = "v2"
	if _, err := h.client.AppsV1().Deployments("ns").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sync()
	if got := h.sizes(); len(got) != 1 || !strings.HasSuffix(got[0], "=0") {
		t.Errorf("first step: got %v, want only the old ReplicaSet, at 0", got)
	}
	h.settle() // its Pods are gone
	h.sync()
	if got := h.sizes(); len(got) != 2 || !slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, "=2") }) {
		t.Errorf("second step: got %v, want the new ReplicaSet at 2", got)
	}
}
