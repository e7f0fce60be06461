package daemonset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/controller/internal/workload"
)

// computeStatus returns ds's status for the Nodes and Pods seen, counted as
// upstream does: each Node that should run a Pod counts once, by its
// oldest Pod; a Node that should not but has one is misscheduled. The
// collision count and conditions are kept from ds.
func computeStatus(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) appsv1.DaemonSetStatus {
	st := appsv1.DaemonSetStatus{
		ObservedGeneration: ds.Generation,
		CollisionCount:     ds.Status.CollisionCount,
		Conditions:         ds.Status.Conditions,
	}
	for _, node := range nodes {
		pods := byNode[node.Name]
		if !nodeFit(ds, node).shouldRun {
			if len(pods) > 0 {
				st.NumberMisscheduled++
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		st.CurrentNumberScheduled++
		pods = append([]*corev1.Pod(nil), pods...)
		sortOldestFirst(pods)
		pod := pods[0]
		if podutil.IsReady(pod) {
			st.NumberReady++
			if workload.IsAvailable(pod, ds.Spec.MinReadySeconds, now) {
				st.NumberAvailable++
			}
		}
		if updated(ds, pod, hash) {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return st
}
