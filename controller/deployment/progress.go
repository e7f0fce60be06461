package deployment

import (
	"context"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// checkPaused records pausing and resuming in the Progressing condition,
// so that a paused rollout is not counted against its deadline.
func (c *Controller) checkPaused(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cur := getCondition(d.Status, progressing)
	if cur != nil && cur.Reason == reasonTimedOut {
		return nil
	}
	pausedBefore := cur != nil && cur.Reason == reasonPaused
	switch {
	case d.Spec.Paused && !pausedBefore:
		setCondition(&d.Status, newCondition(progressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused", c.clock.Now()))
	case !d.Spec.Paused && pausedBefore:
		setCondition(&d.Status, newCondition(progressing, corev1.ConditionUnknown, reasonResumed, "Deployment is resumed", c.clock.Now()))
	default:
		return nil
	}
	return c.updateStatus(ctx, d)
}

// syncRolloutStatus writes d's status with the Progressing condition the
// rollout has earned, and looks again when the progress deadline is due,
// since a stalled rollout has no event to wake it.
func (c *Controller) syncRolloutStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	now := c.clock.Now()
	s := calculateStatus(d, all, newRS, now)
	updateProgressing(d, &s, newRS, now)
	if f := replicaFailureOf(all, newRS); f != nil {
		setCondition(&s, *f)
	} else {
		removeCondition(&s, replicaFailure)
	}
	if reflect.DeepEqual(d.Status, s) {
		if after, ok := requeueAfter(d, s, now); ok {
			c.loop.AddAfter(d.Namespace+"/"+d.Name, after)
		}
		return nil
	}
	d.Status = s
	return c.updateStatus(ctx, d)
}

// requeueAfter says when a rollout that is neither complete nor timed
// out passes its progress deadline: a second after, so the check finds
// it passed.
func requeueAfter(d *appsv1.Deployment, s appsv1.DeploymentStatus, now time.Time) (time.Duration, bool) {
	cur := getCondition(d.Status, progressing)
	if !hasProgressDeadline(d) || cur == nil || complete(d, &s) || cur.Reason == reasonTimedOut {
		return 0, false
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(now)
	if after < time.Second {
		return time.Second, true
	}
	return after + time.Second, true
}
