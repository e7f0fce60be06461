package daemonset

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"portal.dev/portal/controller/internal/workload"
)

func TestRollingUpdate(t *testing.T) {
	nodes := []*corev1.Node{mkNode("a"), mkNode("b"), mkNode("c"), mkNode("d")}
	cases := []struct {
		name       string
		ds         *appsv1.DaemonSet
		pods       []*corev1.Pod
		wantCreate []string
		wantDelete []string
	}{
		{
			name: "maxUnavailable 1 deletes one available old pod",
			ds:   mkDS(),
			pods: []*corev1.Pod{
				mkPod("a", "a", "old", 0, ready), mkPod("b", "b", "old", 0, ready),
				mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
			wantDelete: []string{"a"},
		},
		{
			name: "maxUnavailable 50% deletes two",
			ds:   mkDS(surge(intstr.FromInt32(0), intstr.FromString("50%"))),
			pods: []*corev1.Pod{
				mkPod("a", "a", "old", 0, ready), mkPod("b", "b", "old", 0, ready),
				mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
			wantDelete: []string{"a", "b"},
		},
		{
			name: "an updated pod not yet ready uses the budget",
			ds:   mkDS(),
			pods: []*corev1.Pod{
				mkPod("a", "a", "h", 0), mkPod("b", "b", "old", 0, ready),
				mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
		},
		{
			name: "an unavailable old pod is replaced at once, beyond the budget",
			ds:   mkDS(),
			pods: []*corev1.Pod{
				mkPod("a", "a", "h", 0), mkPod("b", "b", "old", 0),
				mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
			wantDelete: []string{"b"},
		},
		{
			name: "a node without a pod counts as unavailable",
			ds:   mkDS(),
			pods: []*corev1.Pod{
				mkPod("b", "b", "old", 0, ready), mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
		},
		{
			name: "done: nothing to do",
			ds:   mkDS(),
			pods: []*corev1.Pod{
				mkPod("a", "a", "h", 0, ready), mkPod("b", "b", "h", 0, ready),
				mkPod("c", "c", "h", 0, ready), mkPod("d", "d", "h", 0, ready),
			},
		},
		{
			name: "maxSurge 2 adds updated pods next to two old ones",
			ds:   mkDS(surge(intstr.FromInt32(2), intstr.FromInt32(0))),
			pods: []*corev1.Pod{
				mkPod("a", "a", "old", 0, ready), mkPod("b", "b", "old", 0, ready),
				mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
			wantCreate: []string{"a", "b"},
		},
		{
			name: "surging: an available updated pod retires the old one; an unready one holds the surge",
			ds:   mkDS(surge(intstr.FromInt32(2), intstr.FromInt32(0))),
			pods: []*corev1.Pod{
				mkPod("a", "a", "old", 0, ready), mkPod("a2", "a", "h", 1, ready),
				mkPod("b", "b", "old", 0, ready), mkPod("b2", "b", "h", 1),
				mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
			wantCreate: []string{"c"},
			wantDelete: []string{"a"},
		},
		{
			name: "surging: an unavailable old pod gets its replacement beyond the surge",
			ds:   mkDS(surge(intstr.FromInt32(1), intstr.FromInt32(0))),
			pods: []*corev1.Pod{
				mkPod("a", "a", "old", 0, ready), mkPod("a2", "a", "h", 1),
				mkPod("b", "b", "old", 0), mkPod("c", "c", "old", 0, ready), mkPod("d", "d", "old", 0, ready),
			},
			wantCreate: []string{"b"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollingUpdate(tc.ds, nodes, byNodeOf(tc.pods...), "h", t0.Add(time.Hour))
			if !slices.Equal(got.create, tc.wantCreate) {
				t.Errorf("create: got %v, want %v", got.create, tc.wantCreate)
			}
			if del := names(got.delete); !slices.Equal(del, tc.wantDelete) {
				t.Errorf("delete: got %v, want %v", del, tc.wantDelete)
			}
		})
	}
}

func TestAvailable(t *testing.T) {
	p := mkPod("p", "a", "h", 0, ready)
	cases := []struct {
		name     string
		minReady int32
		at       time.Duration
		want     bool
	}{
		{"no minReadySeconds", 0, 0, true},
		{"ready for less than minReadySeconds", 10, 9 * time.Second, false},
		{"ready for exactly minReadySeconds", 10, 10 * time.Second, false},
		{"ready for longer than minReadySeconds", 10, 11 * time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := workload.IsAvailable(p, tc.minReady, t0.Add(tc.at)); got != tc.want {
				t.Errorf("available: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestComputeStatus(t *testing.T) {
	ds := mkDS(nodeSelector("role", "edge"))
	ds.Spec.MinReadySeconds = 30
	nodes := []*corev1.Node{
		mkNode("a", label("role", "edge")), mkNode("b", label("role", "edge")),
		mkNode("c", label("role", "edge")), mkNode("d"),
	}
	pods := byNodeOf(
		mkPod("a", "a", "h", 0, ready),
		mkPod("b", "b", "old", 0, ready),
		mkPod("d", "d", "h", 0),
	)
	got := computeStatus(ds, nodes, pods, "h", t0.Add(20*time.Second))
	want := appsv1.DaemonSetStatus{
		ObservedGeneration:     1,
		DesiredNumberScheduled: 3,
		CurrentNumberScheduled: 2,
		NumberMisscheduled:     1,
		NumberReady:            2,
		UpdatedNumberScheduled: 1,
		NumberAvailable:        0,
		NumberUnavailable:      3,
	}
	if got.String() != want.String() {
		t.Errorf("status: got %+v, want %+v", got, want)
	}
	got = computeStatus(ds, nodes, pods, "h", t0.Add(31*time.Second))
	if got.NumberAvailable != 2 || got.NumberUnavailable != 1 {
		t.Errorf("after minReadySeconds: got available %d unavailable %d, want 2 and 1", got.NumberAvailable, got.NumberUnavailable)
	}
}

func TestUpdatedByTemplateGeneration(t *testing.T) {
	ds := mkDS(func(ds *appsv1.DaemonSet) {
		ds.Annotations = map[string]string{appsv1.DeprecatedTemplateGeneration: "2"}
	})
	gen := func(g string) podOpt { return func(p *corev1.Pod) { p.Labels[templateGenerationLabel] = g } }
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"same hash", mkPod("p", "a", "h", 0), true},
		{"other hash, same generation", mkPod("p", "a", "x", 0, gen("2")), true},
		{"other hash, older generation", mkPod("p", "a", "x", 0, gen("1")), false},
		{"other hash, no generation", mkPod("p", "a", "x", 0), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := updated(ds, tc.pod, "h"); got != tc.want {
				t.Errorf("updated: got %v, want %v", got, tc.want)
			}
		})
	}
	if got := newPod(ds, "a", "h").Labels[templateGenerationLabel]; got != "2" {
		t.Errorf("new pod's %s: got %q, want %q", templateGenerationLabel, got, "2")
	}
}
