package daemonset

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"portal.dev/portal/controller/internal/nodetaint"
)

// nodeNameField is the node field a daemon Pod's affinity pins it by.
const nodeNameField = "metadata.name"

// daemonTolerations are the tolerations upstream adds to every daemon Pod:
// a daemon keeps running on a Node that is not ready, unreachable, under
// pressure or cordoned, since it often is what the Node needs to recover.
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	tols := []corev1.Toleration{
		exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
	if hostNetwork {
		tols = append(tols, exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))
	}
	return tols
}

// addTolerations returns tols with each of more added unless one with the
// same key, operator, value and effect is there already.
func addTolerations(tols []corev1.Toleration, more []corev1.Toleration) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), tols...)
	for _, m := range more {
		dup := false
		for _, t := range tols {
			if t.Key == m.Key && t.Operator == m.Operator && t.Value == m.Value && t.Effect == m.Effect {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, m)
		}
	}
	return out
}

// podSpecFor returns the Pod spec of ds's daemon on nodeName: the template's
// spec with the daemon tolerations added and the required node affinity
// replaced by one term naming the Node, so the scheduler can place it
// nowhere else.
func podSpecFor(ds *appsv1.DaemonSet, nodeName string) corev1.PodSpec {
	spec := *ds.Spec.Template.Spec.DeepCopy()
	spec.Tolerations = addTolerations(spec.Tolerations, daemonTolerations(spec.HostNetwork))
	if nodeName == "" {
		return spec
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	// Upstream replaces the whole required selector: the template's own
	// terms were already checked against the Node when it was chosen.
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName},
		}}}},
	}
	return spec
}

// fit says whether a DaemonSet's Pod belongs on a Node.
type fit struct {
	// shouldRun: a Pod should be created there if none is.
	shouldRun bool
	// shouldContinue: a Pod already there may stay. A NoSchedule taint
	// added later keeps new Pods off but leaves running ones, as upstream.
	shouldContinue bool
}

// nodeFit reports whether ds's Pod should run, and may keep running, on
// node, as upstream's NodeShouldRunDaemonPod decides: the template's
// nodeName, nodeSelector and required affinity must match, and the Pod with
// the daemon tolerations must tolerate the Node's NoSchedule (to start) and
// NoExecute (to stay) taints. The taints the Node's state implies count as
// the scheduler counts them: a daemon Pod tolerates a cordoned Node but is
// not started on one that is not Ready, where it would stay Pending.
func nodeFit(ds *appsv1.DaemonSet, node *corev1.Node) fit {
	tmpl := &ds.Spec.Template.Spec
	if tmpl.NodeName != "" && tmpl.NodeName != node.Name {
		return fit{}
	}
	affinity := nodeaffinity.NewRequiredNodeAffinity(tmpl.NodeSelector, tmpl.Affinity)
	if ok, err := affinity.Match(node); !ok || err != nil {
		return fit{}
	}
	tols := addTolerations(tmpl.Tolerations, daemonTolerations(tmpl.HostNetwork))
	taints := append(nodetaint.Implied(node), node.Spec.Taints...)
	f := fit{shouldRun: true, shouldContinue: true}
	for i := range taints {
		t := &taints[i]
		if !nodetaint.Blocking(t) || nodetaint.Tolerates(tols, t) {
			continue
		}
		f.shouldRun = false
		if t.Effect == corev1.TaintEffectNoExecute {
			f.shouldContinue = false
		}
	}
	return f
}

// targetNode returns the Node a daemon Pod is for: the one it is bound to,
// or, before the scheduler binds it, the one its affinity names.
func targetNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchFields {
			if r.Key == nodeNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return r.Values[0]
			}
		}
	}
	return ""
}
