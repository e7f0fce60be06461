package replicaset

import (
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	appslisters "k8s.io/client-go/listers/apps/v1"

	"portal.dev/portal/controller/internal/loop"
	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/controller/internal/workload"
)

// Informer event handlers: they turn events into ReplicaSet keys and count
// what the controller's own writes were expected to cause.

func (c *Controller) enqueue(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.loop.Add(key)
	}
}

func (c *Controller) onReplicaSetUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := newObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 {
		return
	}
	if old.UID != cur.UID {
		// Deleted and re-created between two events: the old one's
		// expectations mean nothing for the new one.
		c.onReplicaSetDelete(old)
	}
	c.enqueue(cur)
}

func (c *Controller) onReplicaSetDelete(obj any) {
	rs, ok := loop.FromTombstone[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	key := rs.Namespace + "/" + rs.Name
	c.expectations.Delete(key)
	c.loop.Add(key)
}

// newOwners returns the view of the ReplicaSet cache the Pod handlers
// resolve references and selectors against.
func newOwners(sets appslisters.ReplicaSetLister) workload.Owners[*appsv1.ReplicaSet] {
	return workload.Owners[*appsv1.ReplicaSet]{
		Kind: kind.Kind,
		Get: func(ns, name string) (*appsv1.ReplicaSet, error) {
			return sets.ReplicaSets(ns).Get(name)
		},
		List: func(ns string) ([]*appsv1.ReplicaSet, error) {
			return sets.ReplicaSets(ns).List(labels.Everything())
		},
		Selector: func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector },
	}
}

// ownerKey returns the key of the ReplicaSet a controller reference names,
// if it is one this controller's cache knows under that UID.
func (c *Controller) ownerKey(namespace string, ref *metav1.OwnerReference) (string, bool) {
	return c.owners.Key(namespace, ref)
}

func (c *Controller) onPodAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already going (a restart of the
		// controller, a relist): it is a deletion, not a creation.
		c.onPodDelete(pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if key, ok := c.ownerKey(pod.Namespace, ref); ok {
			c.expectations.CreationObserved(key)
			c.loop.Add(key)
		}
		return
	}
	c.enqueueSelecting(pod)
}

func (c *Controller) onPodUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || cur.ResourceVersion == old.ResourceVersion {
		return
	}
	labelsChanged := !maps.Equal(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// A Pod being deleted no longer counts: treat it as gone now, so
		// a replacement is created without waiting for its grace period.
		c.onPodDelete(cur)
		if labelsChanged {
			c.onPodDelete(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !refEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if key, ok := c.ownerKey(old.Namespace, oldRef); ok {
			c.loop.Add(key)
		}
	}
	if curRef != nil {
		key, ok := c.ownerKey(cur.Namespace, curRef)
		if !ok {
			return
		}
		c.loop.Add(key)
		// Availability comes minReadySeconds after readiness, with no
		// event of its own.
		if rs, err := c.replicaSets.ReplicaSets(cur.Namespace).Get(curRef.Name); err == nil &&
			rs.Spec.MinReadySeconds > 0 && !podutil.IsReady(old) && podutil.IsReady(cur) {
			c.loop.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		c.enqueueSelecting(cur)
	}
}

func (c *Controller) onPodDelete(obj any) {
	pod, ok := loop.FromTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	if key, ok := c.ownerKey(pod.Namespace, metav1.GetControllerOfNoCopy(pod)); ok {
		c.expectations.DeletionObserved(key, pod.UID)
		c.loop.Add(key)
	}
}

func refEqual(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}

// enqueueSelecting queues the ReplicaSets whose selector matches an orphan
// Pod, so one of them adopts it.
func (c *Controller) enqueueSelecting(pod *corev1.Pod) {
	keys, err := c.owners.Selecting(pod.Namespace, pod.Labels)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: %w", controllerName, err))
	}
	for _, key := range keys {
		c.loop.Add(key)
	}
}
