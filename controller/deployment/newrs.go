package deployment

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/controller/internal/workload"
)

// replicaSetsAndRevision splits rss into d's new ReplicaSet and the old
// ones, brings the new one's revision and annotations up to date, and
// creates it when create is set and there is none.
func (c *Controller) replicaSetsAndRevision(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	old := findOldReplicaSets(d, rss)
	newRS, err := c.newReplicaSet(ctx, d, rss, old, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, old, nil
}

// newReplicaSet returns d's ReplicaSet for its current template, its
// annotations synced, and records its revision on d.
func (c *Controller) newReplicaSet(ctx context.Context, d *appsv1.Deployment, rss, old []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rss)
	newRevision := strconv.FormatInt(maxRevision(old)+1, 10)
	if existing != nil {
		return c.syncExistingNewRS(ctx, d, existing, newRevision)
	}
	if !create {
		return nil, nil
	}
	return c.createNewRS(ctx, d, old, newRevision)
}

func (c *Controller) syncExistingNewRS(ctx context.Context, d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string) (*appsv1.ReplicaSet, error) {
	rs = rs.DeepCopy()
	annotated := setNewReplicaSetAnnotations(d, rs, newRevision, true)
	if annotated || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
		rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
		updated, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("update replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		rs = updated
	}
	needsUpdate := setDeploymentRevision(d, rs.Annotations[RevisionAnnotation])
	if hasProgressDeadline(d) && getCondition(d.Status, progressing) == nil {
		msg := fmt.Sprintf("Found new replica set %q", rs.Name)
		setCondition(&d.Status, newCondition(progressing, corev1.ConditionTrue, reasonFoundNewRS, msg, c.clock.Now()))
		needsUpdate = true
	}
	if needsUpdate {
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// createNewRS creates the ReplicaSet of d's current template, named
// after the template's hash and sized as the strategy allows.
func (c *Controller) createNewRS(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet, newRevision string) (*appsv1.ReplicaSet, error) {
	rs := c.buildNewRS(d)
	n := newRSReplicas(d, withNew(old, rs), rs)
	rs.Spec.Replicas = &n
	setNewReplicaSetAnnotations(d, rs, newRevision, false)
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	alreadyExists := false
	switch {
	case apierrors.IsAlreadyExists(err):
		alreadyExists = true
		created, err = c.existingRS(ctx, d, rs.Name)
		if err != nil {
			return nil, err
		}
	case err != nil:
		if hasProgressDeadline(d) {
			msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
			setCondition(&d.Status, newCondition(progressing, corev1.ConditionFalse, reasonRSCreateFailed, msg, c.clock.Now()))
			if uerr := c.updateStatus(ctx, d); uerr != nil {
				return nil, uerr
			}
		}
		return nil, fmt.Errorf("create replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	if !alreadyExists && n > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	needsUpdate := setDeploymentRevision(d, newRevision)
	if !alreadyExists && hasProgressDeadline(d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		setCondition(&d.Status, newCondition(progressing, corev1.ConditionTrue, reasonNewRSCreated, msg, c.clock.Now()))
		needsUpdate = true
	}
	if needsUpdate {
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// buildNewRS is the ReplicaSet for d's current template: its hash in the
// name, the selector, the template labels and the labels.
func (c *Controller) buildNewRS(d *appsv1.Deployment) *appsv1.ReplicaSet {
	hash := workload.TemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	template := *d.Spec.Template.DeepCopy()
	template.Labels = withLabel(template.Labels, hashLabel, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, hashLabel, hash)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{workload.ControllerRef(d, kind)},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        template,
		},
	}
}

// existingRS handles a name taken when creating the new ReplicaSet: if
// it is d's own with d's template (a cache behind the API server), it is
// the new one; otherwise the hash collides, and bumping collisionCount
// gives the next sync another name.
func (c *Controller) existingRS(ctx context.Context, d *appsv1.Deployment, name string) (*appsv1.ReplicaSet, error) {
	rs, err := c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get replicaset %s/%s: %w", d.Namespace, name, err)
	}
	if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
		return rs, nil
	}
	var count int32
	if d.Status.CollisionCount != nil {
		count = *d.Status.CollisionCount
	}
	count++
	d.Status.CollisionCount = &count
	if err := c.updateStatus(ctx, d); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("replicaset %s/%s: pod template hash collision, collisionCount now %d", d.Namespace, name, count)
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	out[k] = v
	return out
}
