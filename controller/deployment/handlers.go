package deployment

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"portal.dev/portal/internal/loop"
)

// Informer event handlers: they only turn events into Deployment keys.

func (c *Controller) enqueue(obj any) {
	if d, ok := loop.FromTombstone[*appsv1.Deployment](obj); ok {
		c.loop.Add(d.Namespace + "/" + d.Name)
	}
}

func (c *Controller) onReplicaSetAdd(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if key, ok := c.ownerKey(rs.Namespace, ref); ok {
			c.loop.Add(key)
		}
		return
	}
	// An orphan: the Deployments that select it may adopt it.
	c.enqueueSelecting(rs)
}

func (c *Controller) onReplicaSetUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := newObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	oldRef, curRef := metav1.GetControllerOf(old), metav1.GetControllerOf(cur)
	if oldRef != nil && (curRef == nil || oldRef.UID != curRef.UID) {
		// The old owner lost it and must look again.
		if key, ok := c.ownerKey(old.Namespace, oldRef); ok {
			c.loop.Add(key)
		}
	}
	if curRef != nil {
		if key, ok := c.ownerKey(cur.Namespace, curRef); ok {
			c.loop.Add(key)
		}
		return
	}
	if oldRef != nil || !labels.Equals(old.Labels, cur.Labels) {
		c.enqueueSelecting(cur)
	}
}

func (c *Controller) onReplicaSetDelete(obj any) {
	rs, ok := loop.FromTombstone[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	if key, ok := c.ownerKey(rs.Namespace, metav1.GetControllerOf(rs)); ok {
		c.loop.Add(key)
	}
}

// onPodDelete wakes a Recreate Deployment waiting for its old Pods to be
// gone; rolling updates follow their ReplicaSets' status instead.
func (c *Controller) onPodDelete(obj any) {
	pod, ok := loop.FromTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	uid, ok := rsOwnerUID(pod)
	if !ok {
		return
	}
	rss, err := c.rsLister.ReplicaSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	i := slices.IndexFunc(rss, func(rs *appsv1.ReplicaSet) bool { return rs.UID == uid })
	if i < 0 {
		return
	}
	ref := metav1.GetControllerOf(rss[i])
	key, ok := c.ownerKey(pod.Namespace, ref)
	if !ok {
		return
	}
	d, err := c.deployments.Deployments(pod.Namespace).Get(ref.Name)
	if err == nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.loop.Add(key)
	}
}

// enqueueSelecting queues the Deployments whose selector matches an
// orphaned ReplicaSet.
func (c *Controller) enqueueSelecting(rs *appsv1.ReplicaSet) {
	ds, err := c.deployments.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range ds {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		c.loop.Add(d.Namespace + "/" + d.Name)
	}
}
