package daemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"portal.dev/portal/controller/internal/workload"
)

// defaultHistoryLimit is upstream's revisionHistoryLimit default.
const defaultHistoryLimit = 10

// revisionData is what a DaemonSet's ControllerRevision stores, as upstream:
// a strategic merge patch that replaces the template.
func revisionData(ds *appsv1.DaemonSet) ([]byte, error) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ds.Spec.Template)
	if err != nil {
		return nil, err
	}
	raw["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": raw}})
}

// sameData compares two revisions' data as JSON values, not bytes: the API
// server may store an equal document spelled differently.
func sameData(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// history is ds's ControllerRevisions: the current one and all of them.
type history struct {
	cur *appsv1.ControllerRevision
	all []*appsv1.ControllerRevision
}

// claimRevisions returns the ControllerRevisions ds controls, adopting and
// releasing as for Pods.
func (c *Controller) claimRevisions(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := c.revisions.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	cl := &workload.Claimer[*appsv1.ControllerRevision]{
		Owner: ds, Kind: kind, Selector: selector,
		Recheck: c.recheck(ds), Patch: workload.PatchRevision(c.client),
	}
	return cl.Claim(ctx, all)
}

// syncHistory finds, or creates, the ControllerRevision of ds's current
// template among revs, making it the newest revision, and returns the
// history and the hash that labels the current revision's Pods. A new
// revision whose name another template took raises ds's collision count,
// written to its status before the sync goes on.
func (c *Controller) syncHistory(ctx context.Context, ds *appsv1.DaemonSet, revs []*appsv1.ControllerRevision) (history, string, error) {
	data, err := revisionData(ds)
	if err != nil {
		return history{}, "", fmt.Errorf("encode template: %w", err)
	}
	h := history{all: revs}
	for _, r := range revs {
		if sameData(r.Data.Raw, data) && (h.cur == nil || r.Revision > h.cur.Revision) {
			h.cur = r
		}
	}
	next := workload.NextRevision(revs)
	if h.cur != nil {
		if h.cur.Revision < next-1 {
			// A rollback to an older template makes it the newest again.
			up := h.cur.DeepCopy()
			up.Revision = next
			if h.cur, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, up, metav1.UpdateOptions{}); err != nil {
				return history{}, "", fmt.Errorf("renumber revision %s: %w", up.Name, err)
			}
		}
		return h, h.cur.Labels[workload.RevisionHashLabel], nil
	}
	var count int32
	if ds.Status.CollisionCount != nil {
		count = *ds.Status.CollisionCount
	}
	before := count
	rev := workload.NewRevision(ds, kind, ds.Spec.Template.Labels, runtime.RawExtension{Raw: data}, next)
	created, err := workload.CreateRevision(ctx, c.client, ds, rev, &count)
	if count != before {
		up := ds.DeepCopy()
		up.Status.CollisionCount = &count
		if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil {
			return history{}, "", fmt.Errorf("record collision count %d: %w", count, err)
		}
	}
	if err != nil {
		return history{}, "", fmt.Errorf("create revision %d: %w", next, err)
	}
	h.cur = created
	h.all = append(h.all, created)
	return h, created.Labels[workload.RevisionHashLabel], nil
}

// cleanupHistory keeps revisionHistoryLimit revisions besides the current
// one, deleting the oldest first but never one a Pod still runs, which
// counts towards the limit, as upstream.
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, h history, pods []*corev1.Pod) error {
	limit := defaultHistoryLimit
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	inUse := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			inUse[p.Labels[workload.RevisionHashLabel]] = true
		}
	}
	live := map[string]bool{h.cur.Name: true}
	for _, r := range h.all {
		if r != h.cur && inUse[r.Labels[workload.RevisionHashLabel]] {
			live[r.Name] = true
			limit--
		}
	}
	return workload.TruncateHistory(ctx, c.client, h.all, live, max(limit, 0))
}

func withLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[key] = value
	return out
}
