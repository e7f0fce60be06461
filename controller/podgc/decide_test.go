package podgc

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
