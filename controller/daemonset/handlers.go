package daemonset

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/controller/internal/loop"
	"portal.dev/portal/controller/internal/nodetaint"
	"portal.dev/portal/controller/internal/workload"
)

// Informer event handlers: each event becomes the keys of the DaemonSets
// it may affect, and lowers the expectations of the one it reports on.

func (c *Controller) watchHandlers(sets, revisions, pods, nodes cache.SharedIndexInformer) {
	for _, w := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{sets, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: c.onDaemonSetUpdate,
			DeleteFunc: c.onDaemonSetDelete,
		}},
		// A revision changed or deleted by hand is put back.
		{revisions, cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, cur any) { c.enqueueOwner(cur) },
			DeleteFunc: c.enqueueOwner,
		}},
		{pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onPodAdd,
			UpdateFunc: c.onPodUpdate,
			DeleteFunc: c.onPodDelete,
		}},
		{nodes, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.enqueueAll() },
			UpdateFunc: c.onNodeUpdate,
			DeleteFunc: func(any) { c.enqueueAll() },
		}},
	} {
		c.loop.WatchOrLog(w.inf, w.h)
	}
}

func (c *Controller) enqueue(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.loop.Add(key)
	}
}

func (c *Controller) onDaemonSetUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.DaemonSet)
	cur, ok2 := newObj.(*appsv1.DaemonSet)
	if ok1 && ok2 && old.UID != cur.UID {
		// Deleted and re-created between two events: the old one's
		// expectations mean nothing for the new one.
		c.onDaemonSetDelete(old)
	}
	c.enqueue(newObj)
}

func (c *Controller) onDaemonSetDelete(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.exp.Delete(key)
		c.loop.Add(key)
	}
}

// enqueueOwner queues the DaemonSet controlling a revision.
func (c *Controller) enqueueOwner(obj any) {
	rev, ok := loop.FromTombstone[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if key, ok := c.owners.Key(rev.Namespace, metav1.GetControllerOfNoCopy(rev)); ok {
		c.loop.Add(key)
	}
}

func (c *Controller) enqueueAll() {
	sets, _ := c.sets.List(labels.Everything())
	for _, ds := range sets {
		c.loop.Add(ds.Namespace + "/" + ds.Name)
	}
}

// newOwners returns the view of the DaemonSet cache the Pod handlers
// resolve references and selectors against.
func newOwners(sets appslisters.DaemonSetLister) workload.Owners[*appsv1.DaemonSet] {
	return workload.Owners[*appsv1.DaemonSet]{
		Kind: kind.Kind,
		Get: func(ns, name string) (*appsv1.DaemonSet, error) {
			return sets.DaemonSets(ns).Get(name)
		},
		List: func(ns string) ([]*appsv1.DaemonSet, error) {
			return sets.DaemonSets(ns).List(labels.Everything())
		},
		Selector: func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector },
	}
}

func (c *Controller) onPodAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already going (a restart, a relist):
		// it is a deletion, not a creation.
		c.onPodDelete(pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if key, ok := c.owners.Key(pod.Namespace, ref); ok {
			c.exp.CreationObserved(key)
			c.loop.Add(key)
		}
		return
	}
	c.enqueueSelecting(pod)
}

func (c *Controller) onPodUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || (cur.ResourceVersion != "" && cur.ResourceVersion == old.ResourceVersion) {
		return
	}
	if cur.DeletionTimestamp != nil {
		// A graceful delete shows first as this update; count it then.
		c.onPodDelete(cur)
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !sameRef(curRef, oldRef)
	if refChanged && oldRef != nil {
		if key, ok := c.owners.Key(old.Namespace, oldRef); ok {
			c.loop.Add(key)
		}
	}
	if curRef != nil {
		if key, ok := c.owners.Key(cur.Namespace, curRef); ok {
			c.loop.Add(key)
		}
		return
	}
	// An orphan, or one just released: the sets selecting it may adopt it.
	if refChanged || !reflect.DeepEqual(old.Labels, cur.Labels) {
		c.enqueueSelecting(cur)
	}
}

func (c *Controller) onPodDelete(obj any) {
	pod, ok := loop.FromTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	if key, ok := c.owners.Key(pod.Namespace, metav1.GetControllerOfNoCopy(pod)); ok {
		c.exp.DeletionObserved(key, pod.UID)
		c.loop.Add(key)
	}
}

func sameRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}

// enqueueSelecting queues the DaemonSets whose selector matches an orphan
// Pod, which may adopt it.
func (c *Controller) enqueueSelecting(pod *corev1.Pod) {
	keys, err := c.owners.Selecting(pod.Namespace, pod.Labels)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: %w", controllerName, err))
	}
	for _, key := range keys {
		c.loop.Add(key)
	}
}

// onNodeUpdate queues every DaemonSet when a Node changes in a way that may
// change which DaemonSets belong on it: its labels, its taints, or the
// taints its state implies (cordoned, Ready).
func (c *Controller) onNodeUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	cur, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if !reflect.DeepEqual(old.Labels, cur.Labels) || !reflect.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable || nodetaint.Ready(old) != nodetaint.Ready(cur) {
		c.enqueueAll()
	}
}
