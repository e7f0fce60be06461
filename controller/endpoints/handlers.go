package endpoints

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

// Informer event handlers: every event becomes the keys of the Services
// it may affect, and nothing else happens on the informer's goroutine.

func (c *Controller) add(key string) { c.loop.Add(key) }

func (c *Controller) enqueueObject(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.add(key)
	}
}

func (c *Controller) onServiceDelete(obj any) {
	svc, ok := loop.FromTombstone[*corev1.Service](obj)
	if !ok {
		return
	}
	key := svc.Namespace + "/" + svc.Name
	c.setGone(key, svc.Spec.Selector != nil)
	c.add(key)
}

// onEndpointsUpdate resyncs Endpoints this controller wrote when someone
// changes them, so a stray edit does not last until the next pod event.
// The event of the controller's own write is no such change.
func (c *Controller) onEndpointsUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Endpoints)
	cur, ok2 := newObj.(*corev1.Endpoints)
	if !ok1 || !ok2 || (cur.ResourceVersion != "" && cur.ResourceVersion == old.ResourceVersion) {
		return
	}
	if CreatedByController(cur) && !c.isOwnWrite(cur.Namespace+"/"+cur.Name, cur) {
		c.enqueueObject(cur)
	}
}

func (c *Controller) onPodAddOrDelete(obj any) {
	// Before the caches sync every Service is queued by its own add event;
	// mapping the first list's pods to Services would be wasted work.
	if !c.loop.HasSynced() {
		return
	}
	pod, ok := loop.FromTombstone[*corev1.Pod](obj)
	if !ok {
		return
	}
	if _, tomb := obj.(cache.DeletedFinalStateUnknown); !tomb && !mayBeListed(pod) {
		// A pod created or deleted without an address was in no Endpoints.
		// A missed deletion's last state may be older than the Endpoints,
		// so it is always looked at.
		return
	}
	for _, key := range c.servicesSelecting(pod) {
		c.loop.AddAfter(key, c.pace.Delay(key))
	}
}

// onPodUpdate queues the Services that selected the pod before and after
// the update, if the update changed anything an Endpoints shows.
func (c *Controller) onPodUpdate(oldObj, newObj any) {
	if !c.loop.HasSynced() {
		return
	}
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || !podChanged(old, cur) || (!mayBeListed(old) && !mayBeListed(cur)) {
		// Also nothing to do for a pod being scheduled or started before
		// it has an address: it is in no Endpoints before or after.
		return
	}
	keys := map[string]bool{}
	for _, k := range c.servicesSelecting(cur) {
		keys[k] = true
	}
	if !maps.Equal(old.Labels, cur.Labels) {
		for _, k := range c.servicesSelecting(old) {
			keys[k] = true
		}
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		c.loop.AddAfter(key, c.pace.Delay(key))
	}
}

// servicesSelecting returns the keys of the Services whose selector
// matches pod. A nil selector selects nothing.
func (c *Controller) servicesSelecting(pod *corev1.Pod) []string {
	keys, err := c.selecting.Keys(pod.Namespace, pod.Labels)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: services in %s: %w", controllerName, pod.Namespace, err))
	}
	return keys
}

// mayBeListed reports whether pod can be in any Endpoints: it has an
// address and is not terminal.
func mayBeListed(pod *corev1.Pod) bool {
	return ShouldPodBeInEndpoints(pod, true)
}

// podChanged reports whether an update of a pod can change an Endpoints:
// its labels (which Services select it), its name in DNS, its address,
// node, readiness, phase or termination. Periodic resyncs (same
// resourceVersion) change nothing.
func podChanged(old, cur *corev1.Pod) bool {
	if cur.ResourceVersion != "" && cur.ResourceVersion == old.ResourceVersion {
		return false
	}
	return !maps.Equal(old.Labels, cur.Labels) ||
		old.Spec.Hostname != cur.Spec.Hostname || old.Spec.Subdomain != cur.Spec.Subdomain ||
		old.Spec.NodeName != cur.Spec.NodeName ||
		!old.DeletionTimestamp.Equal(cur.DeletionTimestamp) ||
		old.Status.Phase != cur.Status.Phase ||
		podutil.IsReady(old) != podutil.IsReady(cur) ||
		old.Status.PodIP != cur.Status.PodIP ||
		!equality.Semantic.DeepEqual(old.Status.PodIPs, cur.Status.PodIPs)
}
