package daemonset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNodeFit(t *testing.T) {
	cases := []struct {
		name string
		ds   []dsOpt
		node *corev1.Node
		want fit
	}{
		{"plain node", nil, mkNode("a"), fit{true, true}},
		{"nodeSelector matches", []dsOpt{nodeSelector("disk", "ssd")}, mkNode("a", label("disk", "ssd")), fit{true, true}},
		{"nodeSelector does not match", []dsOpt{nodeSelector("disk", "ssd")}, mkNode("a"), fit{}},
		{"untolerated NoSchedule keeps running pods", nil, mkNode("a", taint("x", corev1.TaintEffectNoSchedule)), fit{false, true}},
		{"untolerated NoExecute evicts", nil, mkNode("a", taint("x", corev1.TaintEffectNoExecute)), fit{}},
		{"PreferNoSchedule is ignored", nil, mkNode("a", taint("x", corev1.TaintEffectPreferNoSchedule)), fit{true, true}},
		{"tolerated taint", []dsOpt{tolerate("x")}, mkNode("a", taint("x", corev1.TaintEffectNoExecute)), fit{true, true}},
		{"daemon tolerations: not-ready NoExecute", nil, mkNode("a", taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)), fit{true, true}},
		{"daemon tolerations: unreachable NoExecute", nil, mkNode("a", taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)), fit{true, true}},
		{"daemon tolerations: unschedulable", nil, mkNode("a", taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)), fit{true, true}},
		{"daemon tolerations: disk pressure", nil, mkNode("a", taint(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)), fit{true, true}},
		{"cordoned node: daemon pods tolerate unschedulable", nil, mkNode("a", cordoned), fit{true, true}},
		// Regression: a NotReady Node got a daemon Pod that stayed Pending
		// and counted as desired but unavailable, stalling rolling updates.
		{"not-ready node: no new pod, running one stays", nil, mkNode("a", notReady), fit{false, true}},
		{"not-ready node, template tolerates not-ready", []dsOpt{tolerate(corev1.TaintNodeNotReady)}, mkNode("a", notReady), fit{true, true}},
		{"network-unavailable only for host network pods", nil, mkNode("a", taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), fit{false, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeFit(mkDS(tc.ds...), tc.node); got != tc.want {
				t.Errorf("nodeFit: got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPodSpecFor(t *testing.T) {
	ds := mkDS(tolerate(corev1.TaintNodeNotReady))
	ds.Spec.Template.Spec.HostNetwork = true
	spec := podSpecFor(ds, "a")
	if got := targetNode(&corev1.Pod{Spec: spec}); got != "a" {
		t.Errorf("affinity target: got %q, want %q", got, "a")
	}
	// The template's own toleration plus upstream's seven for a host
	// network Pod; the template's not-ready (any effect) does not replace
	// the daemon's not-ready NoExecute, which differs in effect.
	if got := len(spec.Tolerations); got != 8 {
		t.Errorf("tolerations: got %d (%v), want 8", got, spec.Tolerations)
	}
	if ds.Spec.Template.Spec.Affinity != nil || len(ds.Spec.Template.Spec.Tolerations) != 1 {
		t.Errorf("template changed: got affinity %v, tolerations %v", ds.Spec.Template.Spec.Affinity, ds.Spec.Template.Spec.Tolerations)
	}
}
