package deployment

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling moves a RollingUpdate one step: the new ReplicaSet up
// as far as maxSurge allows, else the old ones down as far as
// maxUnavailable allows, then the status.
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, true)
	if err != nil {
		return err
	}
	all := withNew(old, newRS)
	scaledUp, err := c.reconcileNewRS(ctx, d, all, newRS)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	scaledDown, err := c.reconcileOldRSs(ctx, d, all, filterActive(old), newRS)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if complete(d, &d.Status) {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, all, newRS)
}

// reconcileNewRS scales the new ReplicaSet towards spec.replicas.
func (c *Controller) reconcileNewRS(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	if replicas(newRS) == desired(d) {
		return false, nil
	}
	n := desired(d)
	if replicas(newRS) < desired(d) {
		n = newRSReplicas(d, all, newRS)
	}
	scaled, _, err := c.scaleAndRecord(ctx, newRS, n, d)
	return scaled, err
}

// reconcileOldRSs scales the old ReplicaSets down, unhealthy replicas
// first, never taking available Pods below spec.replicas minus
// maxUnavailable.
func (c *Controller) reconcileOldRSs(ctx context.Context, d *appsv1.Deployment, all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	if sum(old, specReplicas) == 0 {
		return false, nil
	}
	minAvailable := desired(d) - maxUnavailable(d)
	newUnavailable := replicas(newRS) - newRS.Status.AvailableReplicas
	maxScaledDown := sum(all, specReplicas) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	cleaned, err := c.cleanupUnhealthy(ctx, d, old, maxScaledDown)
	if err != nil {
		return false, err
	}
	scaled, err := c.scaleDownOld(ctx, d, withNew(old, newRS), old)
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// cleanupUnhealthy removes up to maxCleanup unavailable replicas from the
// old ReplicaSets, oldest first: they serve nothing, so they cost no
// availability.
func (c *Controller) cleanupUnhealthy(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet, maxCleanup int32) (int32, error) {
	slices.SortFunc(old, byCreation)
	var total int32
	for _, rs := range old {
		if total >= maxCleanup {
			break
		}
		unhealthy := replicas(rs) - rs.Status.AvailableReplicas
		if replicas(rs) == 0 || unhealthy <= 0 {
			continue
		}
		n := min(maxCleanup-total, unhealthy)
		if _, _, err := c.scaleAndRecord(ctx, rs, replicas(rs)-n, d); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// scaleDownOld scales the old ReplicaSets down, oldest first, by as many
// available Pods as there are above the minimum.
func (c *Controller) scaleDownOld(ctx context.Context, d *appsv1.Deployment, all, old []*appsv1.ReplicaSet) (int32, error) {
	minAvailable := desired(d) - maxUnavailable(d)
	availableN := sum(all, availableReplicas)
	if availableN <= minAvailable {
		return 0, nil
	}
	want := availableN - minAvailable
	slices.SortFunc(old, byCreation)
	var total int32
	for _, rs := range old {
		if total >= want {
			break
		}
		if replicas(rs) == 0 {
			continue
		}
		n := min(replicas(rs), want-total)
		if _, _, err := c.scaleAndRecord(ctx, rs, replicas(rs)-n, d); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
