package replicaset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"

	"portal.dev/portal/controller/internal/workload/workloadtest"
)

// podNames numbers created Pods across harnesses, so a restarted
// controller's Pods never take the last one's names.
var podNames atomic.Int32

var epoch = workloadtest.Epoch

// harness drives a Controller's sync by hand over a fake clientset, with
// informer caches the test fills: a cache that lags the API server (a
// slow watch) is then just a cache the test has not caught up yet.
type harness struct {
	t        *testing.T
	client   *fake.Clientset
	ctrl     *Controller
	recorder *record.FakeRecorder
	clock    *testclock.FakeClock
	rsCache  cache.Indexer
	podCache cache.Indexer
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	// The simple tracker: the field-managing one costs milliseconds per
	// create, seconds for a test of 1,000 Pods.
	client := fake.NewSimpleClientset(objs...)
	// The fake API server neither names Pods after generateName nor gives
	// them UIDs; the real one does both.
	workloadtest.OnCreate(client, "pods", func(pod metav1.Object) {
		if pod.GetName() == "" {
			i := podNames.Add(1)
			pod.SetName(fmt.Sprintf("%s%03d", pod.GetGenerateName(), i))
			pod.SetUID(types.UID("uid-" + pod.GetName()))
			pod.SetCreationTimestamp(metav1.NewTime(epoch.Add(time.Duration(i) * time.Second)))
		}
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(1000)
	clk := testclock.NewFakeClock(epoch.Add(time.Hour))
	c := New(client, factory, rec, Options{Clock: clk})
	h := &harness{
		t: t, client: client, ctrl: c, recorder: rec, clock: clk,
		rsCache:  factory.Apps().V1().ReplicaSets().Informer().GetIndexer(),
		podCache: factory.Core().V1().Pods().Informer().GetIndexer(),
	}
	for _, o := range objs {
		h.cache(o)
	}
	return h
}

func (h *harness) cache(o runtime.Object) {
	h.t.Helper()
	var err error
	switch o := o.(type) {
	case *appsv1.ReplicaSet:
		err = h.rsCache.Add(o)
	case *corev1.Pod:
		err = h.podCache.Add(o)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// catchUp makes the caches what the API server holds, delivering the Pod
// events a watch would, as the informer does.
func (h *harness) catchUp() {
	h.t.Helper()
	ctx := context.Background()
	pods, err := h.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	workloadtest.CatchUp(h.t, h.podCache, pods.Items, h.ctrl.podEvents.Funcs())
	sets, err := h.client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	workloadtest.CatchUp(h.t, h.rsCache, sets.Items, nil)
}

// sync runs one sync of ns/web and returns its error.
func (h *harness) sync() error {
	return h.ctrl.sync(context.Background(), "ns/web")
}

func (h *harness) mustSync() {
	h.t.Helper()
	if err := h.sync(); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
}

// pods returns the names of the Pods the API server holds, sorted.
func (h *harness) pods() []string {
	h.t.Helper()
	list, err := h.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

func (h *harness) rs() *appsv1.ReplicaSet {
	h.t.Helper()
	rs, err := h.client.AppsV1().ReplicaSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return rs
}

// creates counts the Pod creates tried so far.
func (h *harness) creates() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

// events drains the Events recorded so far, as "Type Reason" lines.
func (h *harness) events() []string {
	var out []string
	for _, e := range workloadtest.Events(h.recorder) {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

func replicaSet(replicas int32, opts ...func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "rs-uid", Generation: 1},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
			},
		},
	}
	for _, o := range opts {
		o(rs)
	}
	return rs
}

// pod is a running Pod of ns/web, controlled by it unless an option
// says otherwise, ready since ready (zero: not ready).
func pod(name string, ready time.Time, opts ...func(*corev1.Pod)) *corev1.Pod {
	rs := replicaSet(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": "web", "tier": "front"}, CreationTimestamp: metav1.NewTime(epoch),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, kind)}},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if !ready.IsZero() {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(ready)}}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func orphan(p *corev1.Pod) { p.OwnerReferences = nil }
