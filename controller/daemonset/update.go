package daemonset

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"portal.dev/portal/controller/internal/workload"
)

// allowsSurge reports whether a rolling update may run an updated Pod next
// to an old one on a Node.
func allowsSurge(ds *appsv1.DaemonSet) bool {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, 1, true)
	return err == nil && n > 0
}

// budget resolves maxSurge and maxUnavailable against desired, the number
// of Nodes that should run a Pod, rounding percentages up as upstream. Both
// zero (which validation refuses) means maxUnavailable 1, so an update
// still progresses.
func budget(ds *appsv1.DaemonSet, desired int) (surge, unavailable int) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		return 0, 1
	}
	if ru.MaxSurge != nil {
		surge, _ = intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true)
	}
	unavailable = 1
	if ru.MaxUnavailable != nil {
		unavailable, _ = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable
}

// nodePods is the old and updated Pod on one Node; ok is false when the
// Node has more than one of either, which manage cleans up first.
type nodePods struct {
	old, cur *corev1.Pod
	ok       bool
}

func splitPods(ds *appsv1.DaemonSet, pods []*corev1.Pod, hash string) nodePods {
	np := nodePods{ok: true}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		slot := &np.old
		if updated(ds, p, hash) {
			slot = &np.cur
		}
		if *slot != nil {
			return nodePods{}
		}
		*slot = p
	}
	return np
}

// rollingUpdate returns the old Pods to delete and the Nodes to surge an
// updated Pod onto, as upstream's rollingUpdate: without surge, old Pods are
// deleted while fewer than maxUnavailable Nodes lack an available Pod (an
// old Pod that is not available goes at once, costing nothing); with surge,
// updated Pods are added next to old ones on up to maxSurge Nodes at a
// time, and each old Pod goes once its updated Pod is available.
func rollingUpdate(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) changes {
	var names []string
	for _, n := range nodes {
		if nodeFit(ds, n).shouldRun {
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	surge, maxUnavailable := budget(ds, len(names))
	minReady := ds.Spec.MinReadySeconds
	isAvailable := func(p *corev1.Pod) bool { return workload.IsAvailable(p, minReady, now) }

	if surge == 0 {
		var out changes
		var candidates []*corev1.Pod
		unavailable := 0
		for _, name := range names {
			np := splitPods(ds, byNode[name], hash)
			switch {
			case !np.ok:
				unavailable++
			case np.old == nil && (np.cur == nil || !isAvailable(np.cur)):
				unavailable++
			case np.old == nil:
			case !isAvailable(np.old):
				out.delete = append(out.delete, np.old)
			default:
				candidates = append(candidates, np.old)
			}
		}
		room := min(max(maxUnavailable-unavailable, 0), len(candidates))
		out.delete = append(out.delete, candidates[:room]...)
		return out
	}

	var out changes
	var candidates []string
	surged := 0
	for _, name := range names {
		np := splitPods(ds, byNode[name], hash)
		switch {
		case !np.ok:
			surged++
		case np.old == nil:
			// Nothing to replace; manage creates a missing Pod.
		case np.cur == nil && !isAvailable(np.old):
			out.create = append(out.create, name)
		case np.cur == nil:
			candidates = append(candidates, name)
		case !isAvailable(np.cur):
			surged++
		default:
			out.delete = append(out.delete, np.old)
		}
	}
	room := min(max(surge-surged, 0), len(candidates))
	out.create = append(out.create, candidates[:room]...)
	return out
}
