package daemonset

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/controller/internal/nodetaint"
	"portal.dev/portal/internal/loop"
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
		{pods, c.podEvents.Funcs()},
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
