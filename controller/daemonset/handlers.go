package daemonset

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/controller/internal/loop"
	"portal.dev/portal/controller/internal/nodetaint"
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
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
			DeleteFunc: c.enqueue,
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
		if err := c.loop.Watch(w.inf, w.h); err != nil {
			utilruntime.HandleError(err)
		}
	}
}

func (c *Controller) enqueue(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.loop.Add(key)
	}
}

// enqueueOwner queues the DaemonSet controlling a revision.
func (c *Controller) enqueueOwner(obj any) {
	rev, ok := loop.FromTombstone[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(rev); ref != nil && ref.Kind == kind.Kind && ref.APIVersion == kind.GroupVersion().String() {
		c.loop.Add(rev.Namespace + "/" + ref.Name)
	}
}

func (c *Controller) enqueueAll() {
	sets, _ := c.sets.List(labels.Everything())
	for _, ds := range sets {
		c.loop.Add(ds.Namespace + "/" + ds.Name)
	}
}

// ownerKey returns the key of the DaemonSet controlling pod, if any.
func ownerKey(pod *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != kind.Kind || ref.APIVersion != kind.GroupVersion().String() {
		return "", false
	}
	return pod.Namespace + "/" + ref.Name, true
}

func (c *Controller) onPodAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if key, ok := ownerKey(pod); ok {
		c.exp.CreationObserved(key)
		c.loop.Add(key)
		return
	}
	c.enqueueMatching(pod)
}

func (c *Controller) onPodUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || (cur.ResourceVersion != "" && cur.ResourceVersion == old.ResourceVersion) {
		return
	}
	key, owned := ownerKey(cur)
	if owned && cur.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
		// A graceful delete shows first as this update; count it then.
		c.exp.DeletionObserved(key, cur.UID)
	}
	if oldKey, ok := ownerKey(old); ok && oldKey != key {
		c.loop.Add(oldKey)
	}
	switch {
	case owned:
		c.loop.Add(key)
	case !reflect.DeepEqual(old.Labels, cur.Labels):
		c.enqueueMatching(cur)
	}
}

func (c *Controller) onPodDelete(obj any) {
	pod, ok := loop.FromTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	if key, ok := ownerKey(pod); ok {
		c.exp.DeletionObserved(key, pod.UID)
		c.loop.Add(key)
	}
}

// enqueueMatching queues the DaemonSets whose selector matches an orphan
// Pod, which may adopt it.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		return
	}
	sets, _ := c.sets.DaemonSets(pod.Namespace).List(labels.Everything())
	for _, ds := range sets {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			c.loop.Add(ds.Namespace + "/" + ds.Name)
		}
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
