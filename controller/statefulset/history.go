package statefulset

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"portal.dev/portal/controller/internal/workload"
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
	revs, err := c.claimRevisions(ctx, set, selector)
	if err != nil {
		return history{}, err
	}
	workload.SortRevisions(revs)
	h := history{sorted: revs, collisions: ptr.Deref(set.Status.CollisionCount, 0)}
	want, err := newRevision(set, workload.NextRevision(revs))
	if err != nil {
		return history{}, err
	}
	var equal *appsv1.ControllerRevision
	for _, r := range revs {
		if workload.EqualRevision(r, want) {
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
		h.update, err = workload.CreateRevision(ctx, c.client, set, want, &h.collisions)
		if err != nil {
			return history{}, fmt.Errorf("create revision of statefulset %s/%s: %w", set.Namespace, set.Name, err)
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

// claimRevisions returns the revisions set controls, adopting orphans its
// selector matches and releasing those it no longer does.
func (c *Controller) claimRevisions(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := c.revisions.Candidates(set.Namespace, set.UID)
	if err != nil {
		return nil, fmt.Errorf("list revisions of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	claimer := &workload.Claimer[*appsv1.ControllerRevision]{
		Owner: set, Kind: kind, Selector: selector, Recheck: c.recheck(set),
		Patch: workload.PatchRevision(c.client),
	}
	owned, err := claimer.Claim(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("claim revisions of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	return owned, nil
}

// claimPods returns the pods set owns, as upstream claims them: among
// the pods whose names are the set's, an orphan its selector matches is
// adopted, and an owned pod it no longer matches is released.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.pods.Candidates(set.Namespace, set.UID)
	if err != nil {
		return nil, fmt.Errorf("list pods of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	var named []*corev1.Pod
	for _, pod := range all {
		if _, ok := ordinalOf(set, pod); ok {
			named = append(named, pod)
		}
	}
	claimer := &workload.Claimer[*corev1.Pod]{
		Owner: set, Kind: kind, Selector: selector, Recheck: c.recheck(set),
		Patch: workload.PatchPod(c.client),
	}
	owned, err := claimer.Claim(ctx, named)
	if err != nil {
		return nil, fmt.Errorf("claim pods of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	return owned, nil
}

// recheck reads set from the API server, not the cache, before an
// adoption.
func (c *Controller) recheck(set *appsv1.StatefulSet) func(ctx context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	}
}

// prune deletes the revisions beyond revisionHistoryLimit.
func (c *Controller) prune(ctx context.Context, set *appsv1.StatefulSet, sorted []*appsv1.ControllerRevision, pods []*corev1.Pod, st appsv1.StatefulSetStatus) error {
	limit := int(ptr.Deref(set.Spec.RevisionHistoryLimit, 10))
	live := liveRevisions(pods, st.CurrentRevision, st.UpdateRevision)
	if err := workload.TruncateHistory(ctx, c.client, sorted, live, limit); err != nil {
		return errors.Join(fmt.Errorf("prune history of statefulset %s/%s", set.Namespace, set.Name), err)
	}
	return nil
}
