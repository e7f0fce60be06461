package daemonset

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestManage(t *testing.T) {
	always := func(*appsv1.DaemonSet, *corev1.Pod, string) bool { return true }
	never := func(*appsv1.DaemonSet, *corev1.Pod, string) bool { return false }
	cases := []struct {
		name       string
		ds         *appsv1.DaemonSet
		nodes      []*corev1.Node
		pods       []*corev1.Pod
		failed     failedPolicy
		wantCreate []string
		wantDelete []string
	}{
		{
			name:       "one pod per eligible node",
			ds:         mkDS(nodeSelector("role", "edge")),
			nodes:      []*corev1.Node{mkNode("a", label("role", "edge")), mkNode("b"), mkNode("c", label("role", "edge"))},
			pods:       []*corev1.Pod{mkPod("p-a", "a", "h", 0)},
			wantCreate: []string{"c"},
		},
		{
			name:       "an untolerated NoSchedule taint gets no new pod and keeps an old one",
			ds:         mkDS(),
			nodes:      []*corev1.Node{mkNode("a", taint("x", corev1.TaintEffectNoSchedule)), mkNode("b", taint("x", corev1.TaintEffectNoSchedule))},
			pods:       []*corev1.Pod{mkPod("p-a", "a", "h", 0)},
			wantCreate: nil,
		},
		{
			name:       "a node leaving eligibility loses its pods",
			ds:         mkDS(nodeSelector("role", "edge")),
			nodes:      []*corev1.Node{mkNode("a")},
			pods:       []*corev1.Pod{mkPod("p-a", "a", "h", 0), mkPod("p-a2", "a", "h", 1, deleting)},
			wantDelete: []string{"p-a"},
		},
		{
			name:       "extra pods on a node are deleted, keeping the oldest",
			ds:         mkDS(),
			nodes:      []*corev1.Node{mkNode("a")},
			pods:       []*corev1.Pod{mkPod("p3", "a", "h", 3), mkPod("p1", "a", "h", 1), mkPod("p2", "a", "h", 2)},
			wantDelete: []string{"p2", "p3"},
		},
		{
			name:       "a bound pod is kept over an older unbound one",
			ds:         mkDS(),
			nodes:      []*corev1.Node{mkNode("a")},
			pods:       []*corev1.Pod{mkPod("old", "a", "h", 0, unbound), mkPod("bound", "a", "h", 5)},
			wantDelete: []string{"old"},
		},
		{
			name:       "surging, the oldest old and oldest updated pods stay",
			ds:         mkDS(surge(intstr.FromInt32(1), intstr.FromInt32(0))),
			nodes:      []*corev1.Node{mkNode("a")},
			pods:       []*corev1.Pod{mkPod("o1", "a", "old", 0), mkPod("o2", "a", "old", 1), mkPod("n1", "a", "h", 2), mkPod("n2", "a", "h", 3)},
			wantDelete: []string{"n2", "o2"},
		},
		{
			name:       "a failed pod is deleted once its back-off allows",
			ds:         mkDS(),
			nodes:      []*corev1.Node{mkNode("a"), mkNode("b")},
			pods:       []*corev1.Pod{mkPod("p-a", "a", "h", 0, failed), mkPod("p-b", "b", "h", 0, succeeded)},
			failed:     always,
			wantDelete: []string{"p-a", "p-b"},
		},
		{
			name:   "a failed pod in back-off stays, and no second pod is made",
			ds:     mkDS(),
			nodes:  []*corev1.Node{mkNode("a")},
			pods:   []*corev1.Pod{mkPod("p-a", "a", "h", 0, failed)},
			failed: never,
		},
		{
			name:       "an unbound pod for a node that is gone is deleted; a bound one is left",
			ds:         mkDS(),
			nodes:      nil,
			pods:       []*corev1.Pod{mkPod("unbound", "gone", "h", 0, unbound), mkPod("bound", "gone2", "h", 0)},
			wantDelete: []string{"unbound"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.failed == nil {
				tc.failed = never
			}
			got := manage(tc.ds, tc.nodes, byNodeOf(tc.pods...), "h", tc.failed)
			if !slices.Equal(got.create, tc.wantCreate) {
				t.Errorf("create: got %v, want %v", got.create, tc.wantCreate)
			}
			if del := names(got.delete); !slices.Equal(del, tc.wantDelete) {
				t.Errorf("delete: got %v, want %v", del, tc.wantDelete)
			}
		})
	}
}

func TestUpdated(t *testing.T) {
	noHash := func(p *corev1.Pod) { delete(p.Labels, appsv1.DefaultDaemonSetUniqueLabelKey) }
	cases := []struct {
		name string
		pod  *corev1.Pod
		hash string
		want bool
	}{
		{name: "same hash", pod: mkPod("p", "a", "h", 0), hash: "h", want: true},
		{name: "other hash", pod: mkPod("p", "a", "old", 0), hash: "h", want: false},
		// Regression: an empty hash matched every Pod without the label.
		{name: "no hash either side", pod: mkPod("p", "a", "", 0, noHash), hash: "", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := updated(mkDS(), tc.pod, tc.hash); got != tc.want {
				t.Fatalf("updated: got %v, want %v", got, tc.want)
			}
		})
	}
}
