package deployment

import (
	"cmp"
	"math"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// hashLabel is the label that tells apart the Pods of a Deployment's
// ReplicaSets; its value is the hash of the pod template.
const hashLabel = appsv1.DefaultDeploymentUniqueLabelKey

// replicas is rs's spec.replicas, 0 for nil.
func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// desired is d's spec.replicas, 1 when unset as the API server defaults it.
func desired(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// resolveFenceposts turns maxSurge and maxUnavailable into replica
// counts for want replicas, as upstream: surge rounds up, unavailable
// down, and when both come to 0 one Pod may be unavailable, since a
// rollout could never move otherwise.
func resolveFenceposts(surge, unavailable *intstr.IntOrString, want int32) (int32, int32) {
	zero := intstr.FromInt32(0)
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(surge, zero), int(want), true)
	if err != nil {
		s = 0 // validation refuses it; never surge on a value it let through
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(unavailable, zero), int(want), false)
	if err != nil {
		u = 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

// maxSurge is how many Pods d may run above spec.replicas.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	ru := d.Spec.Strategy.RollingUpdate
	s, _ := resolveFenceposts(ru.MaxSurge, ru.MaxUnavailable, desired(d))
	return s
}

// maxUnavailable is how many of d's spec.replicas may be unavailable,
// never more than spec.replicas.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil || desired(d) == 0 {
		return 0
	}
	ru := d.Spec.Strategy.RollingUpdate
	_, u := resolveFenceposts(ru.MaxSurge, ru.MaxUnavailable, desired(d))
	return min(u, desired(d))
}

// equalIgnoreHash reports whether two pod templates are the same but for
// the pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, hashLabel)
	delete(b.Labels, hashLabel)
	return apiequality.Semantic.DeepEqual(a, b)
}

// byCreation orders ReplicaSets oldest first, by name among equals.
func byCreation(a, b *appsv1.ReplicaSet) int {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return cmp.Compare(a.Name, b.Name)
	}
	if a.CreationTimestamp.Before(&b.CreationTimestamp) {
		return -1
	}
	return 1
}

// byRevision orders ReplicaSets lowest revision first, oldest among
// equals.
func byRevision(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(revision(a), revision(b)); c != 0 {
		return c
	}
	return byCreation(a, b)
}

// bySizeOlder orders ReplicaSets largest first, older first among equals:
// the order in which proportional scaling takes replicas away.
func bySizeOlder(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(replicas(b), replicas(a)); c != 0 {
		return c
	}
	return byCreation(a, b)
}

// bySizeNewer orders ReplicaSets largest first, newer first among equals:
// the order in which proportional scaling hands out replicas.
func bySizeNewer(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(replicas(b), replicas(a)); c != 0 {
		return c
	}
	return byCreation(b, a)
}

// findNewReplicaSet returns the ReplicaSet whose template is d's, the
// oldest if several are.
func findNewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := slices.SortedFunc(slices.Values(rss), byCreation)
	for _, rs := range sorted {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// findOldReplicaSets returns every ReplicaSet of d but the new one.
func findOldReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	newRS := findNewReplicaSet(d, rss)
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS == nil || rs.Name != newRS.Name {
			old = append(old, rs)
		}
	}
	return old
}

// filterActive returns the ReplicaSets that want Pods; nil entries are
// dropped.
func filterActive(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// withNew appends newRS to old when there is one.
func withNew(old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	all := slices.Clone(old)
	if newRS != nil {
		all = append(all, newRS)
	}
	return all
}

// sum adds up f over rss, skipping nil entries.
func sum(rss []*appsv1.ReplicaSet, f func(*appsv1.ReplicaSet) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(rs)
		}
	}
	return n
}

func specReplicas(rs *appsv1.ReplicaSet) int32      { return replicas(rs) }
func statusReplicas(rs *appsv1.ReplicaSet) int32    { return rs.Status.Replicas }
func readyReplicas(rs *appsv1.ReplicaSet) int32     { return rs.Status.ReadyReplicas }
func availableReplicas(rs *appsv1.ReplicaSet) int32 { return rs.Status.AvailableReplicas }

// newRSReplicas is the size the new ReplicaSet may grow to now: for a
// rolling update up to spec.replicas + maxSurge Pods in all, for
// Recreate spec.replicas at once.
func newRSReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	if !isRollingUpdate(d) {
		return desired(d)
	}
	maxTotal := desired(d) + maxSurge(d)
	current := sum(all, specReplicas)
	if current >= maxTotal {
		return replicas(newRS)
	}
	up := min(maxTotal-current, desired(d)-replicas(newRS))
	return replicas(newRS) + up
}

// isSaturated reports whether newRS runs all of d's replicas, available.
func isSaturated(d *appsv1.Deployment, newRS *appsv1.ReplicaSet) bool {
	if newRS == nil {
		return false
	}
	want, ok := intAnnotation(newRS, DesiredReplicasAnnotation)
	return ok && want == desired(d) && replicas(newRS) == desired(d) &&
		newRS.Status.AvailableReplicas == desired(d)
}

// findActiveOrLatest returns the one ReplicaSet with replicas, or the
// newest when none has any; nil when several have replicas.
func findActiveOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	newestFirst := slices.SortedFunc(slices.Values(old), func(a, b *appsv1.ReplicaSet) int { return byCreation(b, a) })
	active := filterActive(withNew(newestFirst, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return newestFirst[0]
	case 1:
		return active[0]
	}
	return nil
}

// proportion is how many replicas rs gains (or, negative, loses) when d
// is scaled by toAdd in the middle of a rollout and added have been
// handed out already: its share of the new size in proportion to its
// share of the old, as its max-replicas annotation records the old.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || replicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	f := fraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(f, allowed)
	}
	return max(f, allowed)
}

func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if desired(d) == 0 {
		return -replicas(rs)
	}
	total := desired(d) + maxSurge(d)
	annotated, ok := intAnnotation(rs, MaxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	size := float64(replicas(rs)*total) / float64(annotated)
	return int32(math.Round(size)) - replicas(rs)
}
