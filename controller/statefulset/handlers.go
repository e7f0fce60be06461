package statefulset

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/controller/internal/loop"
)

// Informer event handlers: every event becomes the keys of the
// StatefulSets it may affect, and nothing else happens on the informer's
// goroutine.

func (c *Controller) enqueue(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.loop.Add(key)
	}
}

// onPod queues the owner of an added or deleted pod, or, for an orphan,
// every set that may adopt it.
func (c *Controller) onPod(obj any) {
	pod, ok := loop.FromTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		c.enqueueOwner(pod.Namespace, ref)
		return
	}
	if pod.DeletionTimestamp != nil {
		return
	}
	for _, set := range c.setsFor(pod) {
		c.loop.Add(set.Namespace + "/" + set.Name)
	}
}

// onPodUpdate queues the owners before and after, and the sets that may
// adopt a pod that lost its owner or changed its labels.
func (c *Controller) onPodUpdate(old, cur any) {
	oldPod, ok1 := old.(*corev1.Pod)
	curPod, ok2 := cur.(*corev1.Pod)
	if !ok1 || !ok2 || oldPod.ResourceVersion == curPod.ResourceVersion {
		return // a resync: nothing changed
	}
	oldRef, curRef := metav1.GetControllerOf(oldPod), metav1.GetControllerOf(curPod)
	if oldRef != nil && (curRef == nil || oldRef.UID != curRef.UID) {
		c.enqueueOwner(oldPod.Namespace, oldRef)
	}
	if curRef != nil {
		c.enqueueOwner(curPod.Namespace, curRef)
		return
	}
	if !maps.Equal(oldPod.Labels, curPod.Labels) || oldRef != nil {
		c.onPod(curPod)
	}
}

func (c *Controller) enqueueOwner(ns string, ref *metav1.OwnerReference) {
	if ref.Kind != "StatefulSet" {
		return
	}
	set, err := c.sets.StatefulSets(ns).Get(ref.Name)
	if err != nil || set.UID != ref.UID {
		return // not the set that owned it: that one is gone
	}
	c.loop.Add(ns + "/" + ref.Name)
}
