package daemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
)

// defaultHistoryLimit is upstream's revisionHistoryLimit default.
const defaultHistoryLimit = 10

// templateHash names a template, salted with the collision count so that a
// name already taken by other content can be replaced by a new one.
func templateHash(tmpl *corev1.PodTemplateSpec, collisions *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(tmpl)
	h.Write(b)
	if collisions != nil {
		h.Write([]byte(strconv.Itoa(int(*collisions))))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

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

// history is ds's ControllerRevisions: the current one and the others.
type history struct {
	cur *appsv1.ControllerRevision
	old []*appsv1.ControllerRevision
}

// ownedBy reports whether obj's controller is ds.
func ownedBy(obj metav1.Object, ds *appsv1.DaemonSet) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == ds.UID
}

// syncHistory finds, or creates, the ControllerRevision of ds's current
// template among revs (ds's own), giving it the newest revision number. A
// name taken by another template raises the collision count, and the sync
// is retried with the next hash.
func (c *Controller) syncHistory(ctx context.Context, ds *appsv1.DaemonSet, revs []*appsv1.ControllerRevision) (history, string, error) {
	data, err := revisionData(ds)
	if err != nil {
		return history{}, "", fmt.Errorf("encode template: %w", err)
	}
	var h history
	var maxRev int64
	for _, r := range revs {
		maxRev = max(maxRev, r.Revision)
		if sameData(r.Data.Raw, data) && (h.cur == nil || r.Revision > h.cur.Revision) {
			h.cur = r
		}
	}
	for _, r := range revs {
		if r != h.cur {
			h.old = append(h.old, r)
		}
	}
	if h.cur != nil {
		hash := h.cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
		if h.cur.Revision < maxRev {
			// A rollback to an older template makes it the newest again.
			up := h.cur.DeepCopy()
			up.Revision = maxRev + 1
			if h.cur, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, up, metav1.UpdateOptions{}); err != nil {
				return history{}, "", fmt.Errorf("renumber revision %s: %w", up.Name, err)
			}
		}
		return h, hash, nil
	}
	hash := templateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ds.Name + "-" + hash,
			Namespace:       ds.Namespace,
			Labels:          withLabel(ds.Spec.Template.Labels, appsv1.DefaultDaemonSetUniqueLabelKey, hash),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: maxRev + 1,
	}
	created, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, rev, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return history{}, "", c.collide(ctx, ds, rev.Name, data)
	}
	if err != nil {
		return history{}, "", fmt.Errorf("create revision %s: %w", rev.Name, err)
	}
	h.cur = created
	return h, hash, nil
}

// collide handles a revision name already taken: ours (a cache behind our
// own create) needs only a retry; another's raises the collision count.
func (c *Controller) collide(ctx context.Context, ds *appsv1.DaemonSet, name string, data []byte) error {
	existing, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil && ownedBy(existing, ds) && sameData(existing.Data.Raw, data) {
		return fmt.Errorf("revision %s exists but is not in the cache yet", name)
	}
	up := ds.DeepCopy()
	n := int32(1)
	if up.Status.CollisionCount != nil {
		n = *up.Status.CollisionCount + 1
	}
	up.Status.CollisionCount = &n
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("raise collision count: %w", err)
	}
	return fmt.Errorf("revision name %s collides with another template; collision count now %d", name, n)
}

// cleanupHistory deletes the oldest revisions beyond revisionHistoryLimit,
// sparing any a live Pod still runs.
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, h history, pods []*corev1.Pod) error {
	limit := defaultHistoryLimit
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	inUse := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			inUse[p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] = true
		}
	}
	var spare []*appsv1.ControllerRevision
	for _, r := range h.old {
		if !inUse[r.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			spare = append(spare, r)
		}
	}
	if len(spare) <= limit {
		return nil
	}
	sort.Slice(spare, func(i, j int) bool { return spare[i].Revision < spare[j].Revision })
	for _, r := range spare[:len(spare)-limit] {
		err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete revision %s: %w", r.Name, err)
		}
	}
	return nil
}

func withLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[key] = value
	return out
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
