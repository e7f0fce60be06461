package workload

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/internal/loop"
)

// PodHandlers are the Pod event handlers of a controller that owns Pods
// (ReplicaSet, DaemonSet, StatefulSet): an event queues the controller its
// Pod's controller reference names, or, for an orphan, the controllers
// that may adopt it, and counts what it reports against Expectations.
// Owner, Adopters and Enqueue are required.
type PodHandlers struct {
	// Owner returns the key of the controller ref names, if it is one of
	// this controller's and its cache knows it under ref's UID.
	Owner func(namespace string, ref *metav1.OwnerReference) (key string, ok bool)
	// Adopters returns the keys of the controllers that may adopt an
	// orphan Pod.
	Adopters func(pod *corev1.Pod) []string
	// Enqueue queues a controller's key for a sync.
	Enqueue func(key string)
	// Expectations, when set, is told of the creations and deletions the
	// events show.
	Expectations *Expectations
	// OwnedUpdate, when set, is called after an update of a Pod its owner
	// still controls has queued the owner's key, for what the controller
	// must queue beyond it (a later check of availability, say).
	OwnedUpdate func(key string, old, cur *corev1.Pod)
}

// PodHandlers returns the Pod event handlers of the controller whose
// objects o reads: owners resolved with Key, orphans offered to those
// Selecting them.
func (o Owners[T]) PodHandlers(enqueue func(key string), exp *Expectations) PodHandlers {
	return PodHandlers{
		Owner: o.Key,
		Adopters: func(pod *corev1.Pod) []string {
			keys, err := o.Selecting(pod.Namespace, pod.Labels)
			if err != nil {
				utilruntime.HandleError(err)
			}
			return keys
		},
		Enqueue:      enqueue,
		Expectations: exp,
	}
}

// Funcs returns the handlers in the form an informer takes.
func (h PodHandlers) Funcs() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    h.OnAdd,
		UpdateFunc: h.OnUpdate,
		DeleteFunc: h.OnDelete,
	}
}

// OnAdd handles a Pod added to the cache.
func (h PodHandlers) OnAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already going (a restart of the
		// controller, a relist): it is a deletion, not a creation.
		h.OnDelete(pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if key, ok := h.Owner(pod.Namespace, ref); ok {
			if h.Expectations != nil {
				h.Expectations.CreationObserved(key)
			}
			h.Enqueue(key)
		}
		return
	}
	h.enqueueAdopters(pod)
}

// OnUpdate handles a changed Pod: its owners before and after are queued,
// and an orphan whose labels or owner changed is offered for adoption.
func (h PodHandlers) OnUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || (cur.ResourceVersion != "" && cur.ResourceVersion == old.ResourceVersion) {
		return // a resync: nothing changed
	}
	labelsChanged := !maps.Equal(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// A Pod being deleted no longer counts: treat it as gone now, so
		// a replacement is made without waiting for its grace period.
		h.OnDelete(cur)
		if labelsChanged {
			h.OnDelete(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !sameController(curRef, oldRef)
	if refChanged && oldRef != nil {
		if key, ok := h.Owner(old.Namespace, oldRef); ok {
			h.Enqueue(key)
		}
	}
	if curRef != nil {
		if key, ok := h.Owner(cur.Namespace, curRef); ok {
			h.Enqueue(key)
			if h.OwnedUpdate != nil {
				h.OwnedUpdate(key, old, cur)
			}
		}
		return
	}
	// An orphan, or one just released: the controllers selecting it may
	// adopt it.
	if labelsChanged || refChanged {
		h.enqueueAdopters(cur)
	}
}

// OnDelete handles a Pod gone from the cache, a missed delete's tombstone
// included.
func (h PodHandlers) OnDelete(obj any) {
	pod, ok := loop.FromTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	if key, ok := h.Owner(pod.Namespace, ref); ok {
		if h.Expectations != nil {
			h.Expectations.DeletionObserved(key, pod.UID)
		}
		h.Enqueue(key)
	}
}

func (h PodHandlers) enqueueAdopters(pod *corev1.Pod) {
	for _, key := range h.Adopters(pod) {
		h.Enqueue(key)
	}
}

// sameController reports whether two controller references name the same
// object; nil names none.
func sameController(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}
