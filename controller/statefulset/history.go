package statefulset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// history is a set's revisions after a sync made sure its template has
// one.
type history struct {
	sorted                []*appsv1.ControllerRevision
	current, update       *appsv1.ControllerRevision
	currentSet, updateSet *appsv1.StatefulSet
	collisions            int32
}

// syncHistory finds or makes the revision of set's template (the update
// revision) and finds the current one, as upstream does: the newest
// revision with the same template is reused, renumbered to the newest if
// it is older (a rollback), and a new one is created otherwise, its name
// bumped by the collision count while another template holds it.
func (c *Controller) syncHistory(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) (history, error) {
	revs, err := c.ownedRevisions(set, selector)
	if err != nil {
		return history{}, err
	}
	sortRevisions(revs)
	h := history{sorted: revs, collisions: ptr.Deref(set.Status.CollisionCount, 0)}
	want, err := newRevision(set, nextNumber(revs), h.collisions)
	if err != nil {
		return history{}, err
	}
	var equal *appsv1.ControllerRevision
	for _, r := range revs {
		if sameTemplate(r, want) {
			equal = r
		}
	}
	switch {
	case equal != nil && equal == revs[len(revs)-1]:
		h.update = equal
	case equal != nil:
		cp := equal.DeepCopy()
		cp.Revision = want.Revision
		h.update, err = c.client.AppsV1().ControllerRevisions(set.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return history{}, fmt.Errorf("renumber revision %s/%s: %w", set.Namespace, cp.Name, err)
		}
		h.sorted = append(h.sorted, h.update)
	default:
		if h.update, err = c.createRevision(ctx, set, want, &h.collisions); err != nil {
			return history{}, err
		}
		h.sorted = append(h.sorted, h.update)
	}
	h.current = h.update
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			h.current = r
		}
	}
	if h.currentSet, err = applyRevision(set, h.current); err != nil {
		return history{}, err
	}
	h.updateSet, err = applyRevision(set, h.update)
	return h, err
}

// ownedRevisions returns the revisions set controls.
func (c *Controller) ownedRevisions(set *appsv1.StatefulSet, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := c.revisions.ControllerRevisions(set.Namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("list revisions of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	var owned []*appsv1.ControllerRevision
	for _, r := range all {
		if ref := metav1.GetControllerOf(r); ref != nil && ref.UID == set.UID {
			owned = append(owned, r)
		}
	}
	return owned, nil
}

// createRevision creates rev. A name another template holds bumps
// *collisions and names rev again; a name the same template of this set
// holds (the cache had not seen it yet) is that revision.
func (c *Controller) createRevision(ctx context.Context, set *appsv1.StatefulSet, rev *appsv1.ControllerRevision, collisions *int32) (*appsv1.ControllerRevision, error) {
	api := c.client.AppsV1().ControllerRevisions(set.Namespace)
	for {
		rev.Name = revisionName(set, rev.Data.Raw, *collisions)
		created, err := api.Create(ctx, rev, metav1.CreateOptions{})
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create revision %s/%s: %w", set.Namespace, rev.Name, err)
		}
		existing, err := api.Get(ctx, rev.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get revision %s/%s: %w", set.Namespace, rev.Name, err)
		}
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == set.UID && sameTemplate(existing, rev) {
			return existing, nil
		}
		*collisions++
	}
}

// prune deletes the revisions beyond revisionHistoryLimit.
func (c *Controller) prune(ctx context.Context, set *appsv1.StatefulSet, sorted []*appsv1.ControllerRevision, pods []*corev1.Pod, st appsv1.StatefulSetStatus) error {
	for _, r := range revisionsToPrune(set, sorted, pods, st.CurrentRevision, st.UpdateRevision) {
		err := c.client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete revision %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	return nil
}
