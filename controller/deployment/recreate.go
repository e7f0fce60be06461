package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// rolloutRecreate moves a Recreate rollout one step: the old ReplicaSets
// to 0, then, once none of their Pods is left running, the new one up to
// spec.replicas.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	all := withNew(old, newRS)
	scaledDown := false
	for _, rs := range filterActive(old) {
		scaled, _, err := c.scaleAndRecord(ctx, rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	running, err := c.oldPodsRunning(d, newRS, old)
	if err != nil {
		return err
	}
	if running {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if newRS == nil {
		newRS, old, err = c.replicaSetsAndRevision(ctx, d, rss, true)
		if err != nil {
			return err
		}
		all = withNew(old, newRS)
	}
	if _, err := c.reconcileNewRS(ctx, d, all, newRS); err != nil {
		return err
	}
	if complete(d, &d.Status) {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, all, newRS)
}

// oldPodsRunning reports whether any Pod of an old ReplicaSet may still
// run: the old ReplicaSets report Pods, or a Pod they control is not yet
// terminal.
func (c *Controller) oldPodsRunning(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) (bool, error) {
	if sum(old, statusReplicas) > 0 {
		return true, nil
	}
	for _, rs := range old {
		pods, err := c.pods.Candidates(d.Namespace, rs.UID)
		if err != nil {
			return false, err
		}
		for _, pod := range pods {
			uid, ok := rsOwnerUID(pod)
			if !ok || uid != rs.UID || (newRS != nil && uid == newRS.UID) {
				continue
			}
			if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
				return true, nil
			}
		}
	}
	return false, nil
}
