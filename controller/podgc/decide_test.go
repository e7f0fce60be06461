package podgc

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node // nil: not in the cache
		want reason
	}{
		{"running on a ready node", pod("p", "n", false), node("n", true), keep},
		{"bound to a missing node", pod("p", "gone", false), nil, orphaned},
		{"terminating on a missing node", pod("p", "gone", true), nil, orphaned},
		{"terminating on a not-ready node", pod("p", "n", true), node("n", false), keep},
		{"terminating on an out-of-service node", pod("p", "n", true), node("n", false, corev1.TaintNodeOutOfService), terminatingOutOfService},
		{"running on an out-of-service node", pod("p", "n", false), node("n", false, corev1.TaintNodeOutOfService), keep},
		{"terminating on a ready out-of-service node", pod("p", "n", true), node("n", true, corev1.TaintNodeOutOfService), keep},
		{"pending, unscheduled", pod("p", "", false), nil, keep},
		{"terminating, unscheduled", pod("p", "", true), nil, terminatingUnscheduled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.pod, tc.node, time.Now()); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDecideNotReadyPastGrace pins issue 23's rule beyond upstream's: a
// terminating Pod on a Node that is not Ready goes once its grace period
// ended NotReadyDeleteMargin ago, without the out-of-service taint.
func TestDecideNotReadyPastGrace(t *testing.T) {
	unknown := node("n", false)
	unknown.Status.Conditions[0].Status = corev1.ConditionUnknown
	tests := []struct {
		name  string
		pod   *corev1.Pod
		node  *corev1.Node
		after time.Duration // since the Pod's deletion timestamp
		want  reason
	}{
		{"not ready, within the margin", pod("p", "n", true), node("n", false), NotReadyDeleteMargin - time.Second, keep},
		{"not ready, past the margin", pod("p", "n", true), node("n", false), NotReadyDeleteMargin + time.Second, terminatingNotReady},
		{"ready unknown, past the margin", pod("p", "n", true), unknown, NotReadyDeleteMargin + time.Second, terminatingNotReady},
		{"ready, past the margin", pod("p", "n", true), node("n", true), time.Hour, keep},
		{"not terminating, not ready", pod("p", "n", false), node("n", false), time.Hour, keep},
		{"out of service wins within the margin", pod("p", "n", true), node("n", false, corev1.TaintNodeOutOfService), 0, terminatingOutOfService},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now().Add(tc.after)
			if ts := tc.pod.DeletionTimestamp; ts != nil {
				now = ts.Add(tc.after)
			}
			if got := decide(tc.pod, tc.node, now); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFailed(t *testing.T) {
	cond := &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: orphanedConditionReason}
	p := pod("p", "gone", false)
	out := failed(p, cond)
	if out == nil || out.Status.Phase != corev1.PodFailed || len(out.Status.Conditions) != 1 || out.Status.Conditions[0].Reason != orphanedConditionReason {
		t.Fatalf("got %+v, want Failed with the DisruptionTarget condition", out)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("the cached pod was modified: phase %s", p.Status.Phase)
	}
	if again := failed(out, cond); again != nil {
		t.Errorf("a Failed pod: got a status write %+v, want none", again.Status)
	}
}

func finished(name string, phase corev1.PodPhase, created int, evictedReason bool) *corev1.Pod {
	p := pod(name, "n", false)
	p.Status.Phase = phase
	p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC))
	if evictedReason {
		p.Status.Reason = "Evicted"
	}
	return p
}

// TestOverThreshold: upstream's --terminated-pod-gc-threshold keeps the
// newest terminated Pods, deleting evicted ones first.
func TestOverThreshold(t *testing.T) {
	pods := []*corev1.Pod{
		finished("running", corev1.PodRunning, 0, false),
		finished("pending", corev1.PodPending, 0, false),
		finished("ok-3", corev1.PodSucceeded, 3, false),
		finished("failed-1", corev1.PodFailed, 1, false),
		finished("ok-2b", corev1.PodSucceeded, 2, false),
		finished("ok-2a", corev1.PodSucceeded, 2, false),
		finished("evicted-9", corev1.PodFailed, 9, true),
	}
	tests := []struct {
		name      string
		threshold int
		want      []string
	}{
		{"disabled", 0, nil},
		{"disabled, negative", -1, nil},
		{"at the threshold", 5, nil},
		{"above the threshold", 6, nil},
		{"one over: the evicted Pod, though newest", 4, []string{"evicted-9"}},
		{"three over: then the oldest, by name among equals", 2, []string{"evicted-9", "failed-1", "ok-2a"}},
		{"all", 1, []string{"evicted-9", "failed-1", "ok-2a", "ok-2b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range overThreshold(pods, tc.threshold) {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
