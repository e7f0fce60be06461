package statefulset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"portal.dev/portal/controller/internal/podutil"
)

// status counts the set's pods as seen. A rolling update whose every pod
// is updated and ready is complete: the update revision becomes the
// current one.
func status(in Input, m members) appsv1.StatefulSetStatus {
	set := in.Set
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    in.CurrentRevision,
		UpdateRevision:     in.UpdateRevision,
		CollisionCount:     &in.CollisionCount,
		Conditions:         set.Status.Conditions,
	}
	for _, pod := range append(nonNil(m.replicas), m.condemned...) {
		if !isCreated(pod) {
			continue
		}
		st.Replicas++
		if isRunningAndReady(pod) {
			st.ReadyReplicas++
			if isAvailable(pod, set.Spec.MinReadySeconds, in.Now) {
				st.AvailableReplicas++
			}
		}
		if isTerminating(pod) {
			continue
		}
		switch revisionOf(pod) {
		case in.CurrentRevision:
			st.CurrentReplicas++
			if in.CurrentRevision == in.UpdateRevision {
				st.UpdatedReplicas++
			}
		case in.UpdateRevision:
			st.UpdatedReplicas++
		}
	}
	if set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType &&
		st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas {
		st.CurrentReplicas = st.UpdatedReplicas
		st.CurrentRevision = st.UpdateRevision
	}
	return st
}

func nonNil[T any](xs []*T) []*T {
	out := make([]*T, 0, len(xs))
	for _, x := range xs {
		if x != nil {
			out = append(out, x)
		}
	}
	return out
}

// recheckAfter is how long until the first ready pod that is not yet
// available becomes so; 0 when none is waiting.
func recheckAfter(in Input) time.Duration {
	minReady := time.Duration(in.Set.Spec.MinReadySeconds) * time.Second
	if minReady <= 0 {
		return 0
	}
	var soonest time.Duration
	for _, pod := range in.Pods {
		if !isRunningAndReady(pod) || isAvailable(pod, in.Set.Spec.MinReadySeconds, in.Now) {
			continue
		}
		c := podutil.ReadyCondition(pod)
		wait := c.LastTransitionTime.Add(minReady).Sub(in.Now)
		if wait <= 0 {
			wait = time.Second
		}
		if soonest == 0 || wait < soonest {
			soonest = wait
		}
	}
	return soonest
}
