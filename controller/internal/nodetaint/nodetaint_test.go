package nodetaint

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestImplied(t *testing.T) {
	readyCond := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}
	}
	cases := []struct {
		name          string
		unschedulable bool
		conditions    []corev1.NodeCondition
		want          []string
	}{
		{name: "ready and schedulable", conditions: readyCond(corev1.ConditionTrue)},
		{name: "cordoned", unschedulable: true, conditions: readyCond(corev1.ConditionTrue),
			want: []string{corev1.TaintNodeUnschedulable}},
		{name: "not ready", conditions: readyCond(corev1.ConditionFalse), want: []string{corev1.TaintNodeNotReady}},
		{name: "no ready condition yet", want: []string{corev1.TaintNodeNotReady}},
		{name: "cordoned and unknown", unschedulable: true, conditions: readyCond(corev1.ConditionUnknown),
			want: []string{corev1.TaintNodeUnschedulable, corev1.TaintNodeNotReady}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: tc.unschedulable},
				Status: corev1.NodeStatus{Conditions: tc.conditions}}
			var got []string
			for _, taint := range Implied(node) {
				if taint.Effect != corev1.TaintEffectNoSchedule {
					t.Errorf("taint %s: got effect %s, want NoSchedule", taint.Key, taint.Effect)
				}
				got = append(got, taint.Key)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("implied taints: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTolerates(t *testing.T) {
	noExecute := []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute}}
	if Tolerates(noExecute, &NotReady) {
		t.Errorf("not-ready NoExecute toleration: got tolerates NoSchedule not-ready, want not")
	}
	everything := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if !Tolerates(everything, &NotReady) {
		t.Errorf("empty-key Exists toleration: got not tolerated, want tolerated")
	}
}
