package deployment

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncScale handles a paused Deployment or one whose replicas changed:
// it resizes the ReplicaSets without rolling out, cleans up old history
// while paused, and writes the status.
func (c *Controller) syncScale(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, old); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncStatus(ctx, d, withNew(old, newRS), newRS)
}

// syncStatusOnly writes the status of a Deployment being deleted.
func (c *Controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	return c.syncStatus(ctx, d, withNew(old, newRS), newRS)
}

// syncStatus writes d's status as its ReplicaSets show it, if it changed.
func (c *Controller) syncStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	s := calculateStatus(d, all, newRS, c.clock.Now())
	if reflect.DeepEqual(d.Status, s) {
		return nil
	}
	d.Status = s
	return c.updateStatus(ctx, d)
}

// isScalingEvent reports whether d's replicas changed since its active
// ReplicaSets were last sized, by their desired-replicas annotation.
func (c *Controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (bool, error) {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return false, err
	}
	for _, rs := range filterActive(withNew(old, newRS)) {
		if want, ok := intAnnotation(rs, DesiredReplicasAnnotation); ok && want != desired(d) {
			return true, nil
		}
	}
	return false, nil
}

// scale resizes d's ReplicaSets to its replicas: the only active one
// takes them all; a saturated new one leaves the old ones none; in the
// middle of a rolling update the change is shared out in proportion.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	if rs := findActiveOrLatest(newRS, old); rs != nil {
		if replicas(rs) == desired(d) {
			return nil
		}
		_, _, err := c.scaleAndRecord(ctx, rs, desired(d), d)
		return err
	}
	if isSaturated(d, newRS) {
		for _, rs := range filterActive(old) {
			if _, _, err := c.scaleAndRecord(ctx, rs, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	active := filterActive(withNew(old, newRS))
	sizes, op := proportionalSizes(d, active)
	for _, rs := range active {
		if _, _, err := c.scaleRS(ctx, rs, sizes[rs.Name], d, op); err != nil {
			return err
		}
	}
	return nil
}

// proportionalSizes shares out the change of d's replicas (plus surge)
// over its active ReplicaSets in proportion to their sizes, as upstream:
// the largest takes the rounding leftover. It sorts active in the order
// the change is handed out and says whether it is a scale "up" or "down".
func proportionalSizes(d *appsv1.Deployment, active []*appsv1.ReplicaSet) (map[string]int32, string) {
	var allowed int32
	if desired(d) > 0 {
		allowed = desired(d) + maxSurge(d)
	}
	toAdd := allowed - sum(active, specReplicas)
	op := ""
	switch {
	case toAdd > 0:
		slices.SortFunc(active, bySizeNewer)
		op = "up"
	case toAdd < 0:
		slices.SortFunc(active, bySizeOlder)
		op = "down"
	}
	sizes := map[string]int32{}
	var added int32
	for _, rs := range active {
		p := proportion(rs, d, toAdd, added)
		sizes[rs.Name] = replicas(rs) + p
		added += p
	}
	if len(active) > 0 && toAdd != 0 {
		first := active[0].Name
		sizes[first] = max(0, sizes[first]+toAdd-added)
	}
	return sizes, op
}

// scaleAndRecord sets rs to size n, if it is not already.
func (c *Controller) scaleAndRecord(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	if replicas(rs) == n {
		return false, rs, nil
	}
	op := "down"
	if replicas(rs) < n {
		op = "up"
	}
	return c.scaleRS(ctx, rs, n, d, op)
}

// scaleRS writes rs's size and replicas annotations and records a
// ScalingReplicaSet Event when the size changed.
func (c *Controller) scaleRS(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment, op string) (bool, *appsv1.ReplicaSet, error) {
	sizeChanges := replicas(rs) != n
	maxReplicas := desired(d) + maxSurge(d)
	if !sizeChanges && !replicasAnnotationsNeedUpdate(rs, desired(d), maxReplicas) {
		return false, rs, nil
	}
	from := replicas(rs)
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &n
	setReplicasAnnotations(cp, desired(d), maxReplicas)
	updated, err := c.client.AppsV1().ReplicaSets(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scale replicaset %s/%s to %d: %w", rs.Namespace, rs.Name, n, err)
	}
	*rs = *updated
	if sizeChanges {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", op, rs.Name, from, n)
	}
	return sizeChanges, rs, nil
}

// cleanup deletes d's oldest ReplicaSets beyond revisionHistoryLimit, of
// those that have no Pods left and whose status has caught up.
func (c *Controller) cleanup(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet) error {
	if !hasRevisionHistoryLimit(d) {
		return nil
	}
	for _, rs := range cleanable(d, old) {
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &rs.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete old replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
	}
	return nil
}

// cleanable picks the old ReplicaSets cleanup deletes: the lowest
// revisions beyond the limit that are scaled to 0 with no Pods.
func cleanable(d *appsv1.Deployment, old []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var alive []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs != nil && rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	diff := len(alive) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	slices.SortFunc(alive, byRevision)
	var out []*appsv1.ReplicaSet
	for _, rs := range alive[:diff] {
		if rs.Status.Replicas != 0 || replicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		out = append(out, rs)
	}
	return out
}
