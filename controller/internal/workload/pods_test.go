package workload

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var rsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

func TestPodFromTemplate(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid"}
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"a": "b"},
			Finalizers:  []string{"example.com/f"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	pod := PodFromTemplate(tmpl, owner, rsKind, "")
	if pod.GenerateName != "web-" || pod.Name != "" || pod.Namespace != "ns" {
		t.Errorf("got name %q generateName %q namespace %q, want \"\", web-, ns", pod.Name, pod.GenerateName, pod.Namespace)
	}
	if pod.Labels["app"] != "web" || pod.Annotations["a"] != "b" || len(pod.Finalizers) != 1 || pod.Spec.Containers[0].Image != "img" {
		t.Errorf("got %+v, want the template's labels, annotations, finalizers and spec", pod)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.UID != "rs-uid" || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("got controller ref %+v, want ReplicaSet web rs-uid blocking owner deletion", ref)
	}
	pod.Labels["app"] = "changed"
	if tmpl.Labels["app"] != "web" {
		t.Errorf("changing the Pod changed the template")
	}

	named := PodFromTemplate(tmpl, owner, rsKind, "web-0")
	if named.Name != "web-0" || named.GenerateName != "" {
		t.Errorf("got name %q generateName %q, want web-0 and none", named.Name, named.GenerateName)
	}
}

func TestFilterActive(t *testing.T) {
	now := metav1.Now()
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "running"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		{ObjectMeta: metav1.ObjectMeta{Name: "failed"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
		{ObjectMeta: metav1.ObjectMeta{Name: "deleting", DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
	if got := names(FilterActive(pods)); got != "running,pending" {
		t.Errorf("got %s, want running,pending", got)
	}
}

func names(pods []*corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Name)
	}
	return strings.Join(s, ",")
}

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(100, 0))},
		Spec:       corev1.PodSpec{NodeName: "node"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func unassigned(p *corev1.Pod)        { p.Spec.NodeName = "" }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func created(sec int64) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(time.Unix(sec, 0)) }
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a"}, {Name: "b", RestartCount: n}}
	}
}
func cost(v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{DeletionCostAnnotation: v} }
}
func readyAt(sec int64) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(sec, 0)),
		}}
	}
}

func TestSortForDeletion(t *testing.T) {
	tests := []struct {
		name string
		pods []*corev1.Pod // in the order wanted
	}{
		{"unassigned first", []*corev1.Pod{mkPod("u", unassigned), mkPod("a")}},
		{"pending, unknown, running", []*corev1.Pod{
			mkPod("p", phase(corev1.PodPending)), mkPod("u", phase(corev1.PodUnknown)), mkPod("r")}},
		{"not ready first", []*corev1.Pod{mkPod("n"), mkPod("r", readyAt(10))}},
		{"ready for less time first", []*corev1.Pod{mkPod("later", readyAt(20)), mkPod("earlier", readyAt(10))}},
		{"more restarts first", []*corev1.Pod{mkPod("many", restarts(5)), mkPod("few", restarts(1))}},
		{"lower deletion cost first", []*corev1.Pod{
			mkPod("cheap", readyAt(10), cost("-5")), mkPod("default", readyAt(20), cost("junk")), mkPod("dear", readyAt(30), cost("100"))}},
		{"newer first", []*corev1.Pod{mkPod("new", created(200)), mkPod("old", created(100))}},
		{"phase before readiness and age", []*corev1.Pod{
			mkPod("pending-old", phase(corev1.PodPending), created(1)), mkPod("running-new-notready", created(500)),
			mkPod("running-ready", readyAt(5))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := names(tc.pods)
			for shift := range tc.pods {
				in := append(append([]*corev1.Pod{}, tc.pods[shift:]...), tc.pods[:shift]...)
				SortForDeletion(in)
				if got := names(in); got != want {
					t.Errorf("from %s: got %s, want %s", fmt.Sprint(shift), got, want)
				}
			}
		})
	}
}

func TestIsAvailable(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		pod      *corev1.Pod
		minReady int32
		want     bool
	}{
		{"not ready", mkPod("p"), 0, false},
		{"ready, no minimum", mkPod("p", readyAtTime(now)), 0, true},
		{"ready too recently", mkPod("p", readyAtTime(now.Add(-30*time.Second))), 60, false},
		{"ready long enough", mkPod("p", readyAtTime(now.Add(-61*time.Second))), 60, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsAvailable(tc.pod, tc.minReady, now); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func readyAtTime(at time.Time) podOpt { return readyAt(at.Unix()) }

func on(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
func uid(u string) podOpt   { return func(p *corev1.Pod) { p.UID = types.UID(u) } }

func TestRankForDeletion(t *testing.T) {
	now := time.Unix(1<<20, 0)
	tests := []struct {
		name    string
		pods    []*corev1.Pod // in the order wanted
		related []*corev1.Pod
		now     time.Time
	}{
		{
			name: "doubled up first",
			pods: []*corev1.Pod{mkPod("crowded", on("n1"), created(100)), mkPod("alone", on("n2"), created(200))},
			related: []*corev1.Pod{mkPod("x", on("n1")), mkPod("y", on("n1")), mkPod("z", on("n2")),
				mkPod("gone", on("n2"), phase(corev1.PodSucceeded))},
		},
		{
			name:    "deletion cost before colocation",
			pods:    []*corev1.Pod{mkPod("cheap", on("n2"), cost("-1")), mkPod("crowded", on("n1"))},
			related: []*corev1.Pod{mkPod("x", on("n1")), mkPod("y", on("n1"))},
		},
		{
			// Ages 1000 s and 1010 s share a power of two: UID decides.
			name: "about the same age by UID",
			pods: []*corev1.Pod{mkPod("older-a", uid("a"), created(now.Unix()-1010)), mkPod("newer-b", uid("b"), created(now.Unix()-1000))},
			now:  now,
		},
		{
			name: "much newer first",
			pods: []*corev1.Pod{mkPod("new-b", uid("b"), created(now.Unix()-10)), mkPod("old-a", uid("a"), created(now.Unix()-1000))},
			now:  now,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := names(tc.pods)
			in := slices.Clone(tc.pods)
			slices.Reverse(in)
			RankForDeletion(in, tc.related, tc.now)
			if got := names(in); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}
