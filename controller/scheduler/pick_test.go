package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func tainted(key, value string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func tolerating(tol corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tol) }
}

// requiring gives the Pod one required node affinity term.
func requiring(term corev1.NodeSelectorTerm) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{term},
			},
		}}
	}
}

// daemonTolerations are those the DaemonSet controller gives its pods that
// bear on the scheduler.
func daemonTolerations() []podOpt {
	exists := func(key string, effect corev1.TaintEffect) podOpt {
		return tolerating(corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
	}
	return []podOpt{
		exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
}

// onlyNode is the affinity a DaemonSet Pod carries for its Node.
func onlyNode(name string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name},
	}}}
}

func TestPick(t *testing.T) {
	cases := []struct {
		name     string
		pod      *corev1.Pod
		nodes    []*corev1.Node
		count    map[string]int
		wantNode string
		wantMsg  string
	}{
		{
			name:     "matchFields metadata.name picks that node even when busier",
			pod:      mkPod("p", requiring(onlyNode("b"))),
			nodes:    []*corev1.Node{mkNode("a"), mkNode("b")},
			count:    map[string]int{"b": 5},
			wantNode: "b",
		},
		{
			name:    "matchFields naming a missing node fits none",
			pod:     mkPod("p", requiring(onlyNode("z"))),
			nodes:   []*corev1.Node{mkNode("a"), mkNode("b")},
			wantMsg: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{
			name: "matchExpressions on labels",
			pod: mkPod("p", requiring(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "disk", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"hdd"},
			}}})),
			nodes:    []*corev1.Node{mkNode("a", label("disk", "hdd")), mkNode("b", label("disk", "ssd"))},
			wantNode: "b",
		},
		{
			name:     "nodeSelector and affinity must both match",
			pod:      mkPod("p", selecting("disk", "ssd"), requiring(onlyNode("a"))),
			nodes:    []*corev1.Node{mkNode("a", label("disk", "hdd")), mkNode("b", label("disk", "ssd"))},
			wantMsg:  "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
			wantNode: "",
		},
		{
			name: "NoSchedule and NoExecute taints keep untolerating pods off; PreferNoSchedule does not",
			pod:  mkPod("p"),
			nodes: []*corev1.Node{
				mkNode("a", tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
				mkNode("b", tainted("gone", "", corev1.TaintEffectNoExecute)),
				mkNode("c", tainted("soft", "", corev1.TaintEffectPreferNoSchedule)),
			},
			wantNode: "c",
		},
		{
			name: "untolerated taints are named in the message",
			pod:  mkPod("p"),
			nodes: []*corev1.Node{
				mkNode("a", tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
				mkNode("b", tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
				mkNode("c", tainted("gone", "", corev1.TaintEffectNoExecute)),
			},
			wantMsg: "0/3 nodes are available: 1 node(s) had untolerated taint {gone: }, 2 node(s) had untolerated taint {dedicated: gpu}.",
		},
		{
			name: "a matching toleration lets the pod on",
			pod: mkPod("p", tolerating(corev1.Toleration{
				Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule,
			})),
			nodes:    []*corev1.Node{mkNode("a", tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule))},
			wantNode: "a",
		},
		{
			name: "a toleration for another value does not",
			pod: mkPod("p", tolerating(corev1.Toleration{
				Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cpu", Effect: corev1.TaintEffectNoSchedule,
			})),
			nodes:   []*corev1.Node{mkNode("a", tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule))},
			wantMsg: "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}.",
		},
		{
			name:     "DaemonSet tolerations reach a cordoned node",
			pod:      mkPod("p", append(daemonTolerations(), requiring(onlyNode("a")))...),
			nodes:    []*corev1.Node{mkNode("a", cordoned), mkNode("b", notReady)},
			wantNode: "a",
		},
		{
			// Upstream's not-ready node carries a NoSchedule taint that
			// DaemonSet pods (tolerating only its NoExecute twin) do not
			// tolerate.
			name:    "DaemonSet tolerations do not reach a not ready node",
			pod:     mkPod("p", append(daemonTolerations(), requiring(onlyNode("b")))...),
			nodes:   []*corev1.Node{mkNode("a", cordoned), mkNode("b", notReady)},
			wantMsg: "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were not ready.",
		},
		{
			name: "tolerating the NoSchedule not-ready taint reaches a not ready node",
			pod: mkPod("p", requiring(onlyNode("b")),
				tolerating(corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists})),
			nodes:    []*corev1.Node{mkNode("a", cordoned), mkNode("b", notReady)},
			wantNode: "b",
		},
		{
			name:     "an empty-key Exists toleration tolerates everything",
			pod:      mkPod("p", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})),
			nodes:    []*corev1.Node{mkNode("a", cordoned, tainted("x", "y", corev1.TaintEffectNoExecute))},
			wantNode: "a",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node, msg := pick(tc.pod, tc.nodes, tc.count)
			if node != tc.wantNode || msg != tc.wantMsg {
				t.Errorf("pick: got %q/%q, want %q/%q", node, msg, tc.wantNode, tc.wantMsg)
			}
		})
	}
}

// BenchmarkPick measures one Pod placed among many plain Nodes, the
// common case the filters must keep cheap.
func BenchmarkPick(b *testing.B) {
	nodes := make([]*corev1.Node, 100)
	for i := range nodes {
		nodes[i] = mkNode(string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	pod := mkPod("p")
	for b.Loop() {
		pick(pod, nodes, nil)
	}
}
