package statefulset

import (
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Input is what one sync of a StatefulSet decides from.
type Input struct {
	// Set is the StatefulSet as the cache has it.
	Set *appsv1.StatefulSet
	// Current and Update are Set with the pod template of its current and
	// its update revision, named CurrentRevision and UpdateRevision.
	Current, Update                 *appsv1.StatefulSet
	CurrentRevision, UpdateRevision string
	// CollisionCount is the set's collision count after naming the
	// update revision.
	CollisionCount int32
	// Pods are the pods the set owns whose names are among its own.
	Pods []*corev1.Pod
	// Now is the time availability (minReadySeconds) is judged at.
	Now time.Time
}

// Result is what a sync must do, in order: Delete, then Create, then Fix.
type Result struct {
	// Create are the pods to create, lowest ordinal first.
	Create []*corev1.Pod
	// Delete are the pods to delete.
	Delete []*corev1.Pod
	// Fix are pods whose identity (hostname, subdomain, labels) was lost,
	// updated copies to write back.
	Fix []*corev1.Pod
	// Status is the StatefulSet status the pods as seen give.
	Status appsv1.StatefulSetStatus
	// RecheckAfter, when positive, is when a ready pod becomes available,
	// which no event announces.
	RecheckAfter time.Duration
}

// members sorts a set's pods by ordinal: those the spec wants, indexed
// by ordinal - start (nil where none exists), and the condemned ones
// beyond, lowest ordinal first.
type members struct {
	replicas  []*corev1.Pod
	condemned []*corev1.Pod
}

func sortMembers(set *appsv1.StatefulSet, pods []*corev1.Pod) members {
	start, n := startOrdinal(set), replicas(set)
	m := members{replicas: make([]*corev1.Pod, n)}
	ordinal := map[*corev1.Pod]int{}
	for _, p := range pods {
		ord, ok := ordinalOf(set, p)
		if !ok {
			continue
		}
		ordinal[p] = ord
		if ord >= start && ord < start+n {
			m.replicas[ord-start] = p
		} else {
			m.condemned = append(m.condemned, p)
		}
	}
	slices.SortFunc(m.condemned, func(a, b *corev1.Pod) int { return ordinal[a] - ordinal[b] })
	return m
}

// Plan decides one sync of a StatefulSet as upstream's controller does:
// missing and finished pods are made again under their names, pods beyond
// the replicas removed from the highest ordinal down, then outdated pods
// deleted from the highest ordinal down to the partition, so that they
// come back from the update revision. Under OrderedReady each step waits
// for every pod before it to be healthy, and a sync takes one step;
// Parallel takes every creation and removal at once.
func Plan(in Input) Result {
	m := sortMembers(in.Set, in.Pods)
	res := Result{Status: status(in, m)}
	res.RecheckAfter = recheckAfter(in)
	p := planner{in: in, m: m, res: &res,
		ordered:  in.Set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement,
		minReady: in.Set.Spec.MinReadySeconds}
	if p.scaleAndRepair() && p.scaleDown() {
		p.rollingUpdate()
	}
	return res
}

type planner struct {
	in       Input
	m        members
	res      *Result
	ordered  bool
	minReady int32 // seconds
}

func (p *planner) healthy(pod *corev1.Pod) bool { return isHealthy(pod, p.minReady, p.in.Now) }

// scaleAndRepair creates missing pods and replaces finished ones, lowest
// ordinal first. It reports whether the sync may go on to later steps.
func (p *planner) scaleAndRepair() bool {
	start := startOrdinal(p.in.Set)
	for i, pod := range p.m.replicas {
		switch {
		case pod == nil:
			p.res.Create = append(p.res.Create, p.versionedPod(start+i))
		case isFinished(pod):
			// Deleted now, made again once the deletion is seen.
			p.res.Delete = append(p.res.Delete, pod)
		default:
			if p.ordered && !p.healthy(pod) {
				return false
			}
			if !identityMatches(p.in.Set, pod, start+i) {
				fixed := pod.DeepCopy()
				setIdentity(p.in.Set, fixed, start+i)
				p.res.Fix = append(p.res.Fix, fixed)
			}
			continue
		}
		if p.ordered {
			return false
		}
	}
	return true
}

// scaleDown removes the condemned pods, highest ordinal first. Under
// OrderedReady it removes one at a time and only while every other pod is
// healthy, though an unhealthy pod may itself be the one removed.
func (p *planner) scaleDown() bool {
	first := p.firstUnhealthy()
	for i := len(p.m.condemned) - 1; i >= 0; i-- {
		pod := p.m.condemned[i]
		if isTerminating(pod) {
			if p.ordered {
				return false
			}
			continue
		}
		if p.ordered && !p.healthy(pod) && pod != first {
			return false
		}
		p.res.Delete = append(p.res.Delete, pod)
		if p.ordered {
			return false
		}
	}
	return true
}

func (p *planner) firstUnhealthy() *corev1.Pod {
	for _, pod := range append(slices.Clone(p.m.replicas), p.m.condemned...) {
		if pod != nil && !p.healthy(pod) {
			return pod
		}
	}
	return nil
}

// rollingUpdate deletes outdated pods from the highest ordinal down to
// the partition, as many as maxUnavailable allows once the pods already
// unavailable (at any ordinal) are counted; each comes back from the
// update revision.
func (p *planner) rollingUpdate() {
	strategy := p.in.Set.Spec.UpdateStrategy
	if strategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return
	}
	from, maxUnavailable := 0, 1
	if ru := strategy.RollingUpdate; ru != nil {
		from = int(ptr.Deref(ru.Partition, 0))
		maxUnavailable = scaledMaxUnavailable(ru.MaxUnavailable, replicas(p.in.Set))
	}
	budget := maxUnavailable
	for _, pod := range p.m.replicas {
		if pod == nil || !p.healthy(pod) {
			budget--
		}
	}
	for i := len(p.m.replicas) - 1; i >= from && budget > 0; i-- {
		pod := p.m.replicas[i]
		if pod == nil || isTerminating(pod) || revisionOf(pod) == p.in.UpdateRevision {
			continue
		}
		p.res.Delete = append(p.res.Delete, pod)
		budget--
	}
}

// scaledMaxUnavailable resolves maxUnavailable against the replicas,
// percentages rounding down as upstream, and never below 1.
func scaledMaxUnavailable(v *intstr.IntOrString, replicas int) int {
	if v == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, replicas, false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// versionedPod makes the pod at ordinal from the current revision when
// it lies below the partition of a rolling update (or among the current
// replicas without one), and from the update revision otherwise.
func (p *planner) versionedPod(ordinal int) *corev1.Pod {
	set := p.in.Current
	if set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		limit := int(set.Status.CurrentReplicas)
		if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			limit = int(ptr.Deref(ru.Partition, 0))
		}
		if ordinal < startOrdinal(set)+limit && p.in.CurrentRevision != p.in.UpdateRevision {
			return newPod(p.in.Current, p.in.CurrentRevision, ordinal)
		}
	}
	return newPod(p.in.Update, p.in.UpdateRevision, ordinal)
}
