package mirroring

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"portal.dev/portal/internal/loop"
)

// Informer event handlers: every event becomes the key (namespace/name,
// shared by an Endpoints and its Service) it may affect, and nothing else
// happens on the informer's goroutine.

func (c *Controller) add(key string) { c.loop.Add(key) }

func (c *Controller) enqueueObject(obj any) {
	if key, ok := loop.Key(obj); ok {
		c.add(key)
	}
}

// onEndpoints handles adds and deletes. Endpoints that are not mirrored
// have no slices to create or remove (skip-mirror removed them when set).
func (c *Controller) onEndpoints(obj any) {
	if ep, ok := loop.FromTombstone[*corev1.Endpoints](obj); ok && ShouldMirror(ep) {
		c.enqueueObject(obj)
	}
}

func (c *Controller) onEndpointsUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Endpoints)
	cur, ok2 := newObj.(*corev1.Endpoints)
	if ok1 && ok2 && (ShouldMirror(old) || ShouldMirror(cur)) {
		c.enqueueObject(cur)
	}
}

// onService handles adds and deletes: only selector-less Services can
// have mirrored slices.
func (c *Controller) onService(obj any) {
	if svc, ok := loop.FromTombstone[*corev1.Service](obj); ok && svc.Spec.Selector == nil {
		c.enqueueObject(obj)
	}
}

// onServiceUpdate reacts to a selector being added or removed, which
// ends or starts mirroring.
func (c *Controller) onServiceUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Service)
	cur, ok2 := newObj.(*corev1.Service)
	if ok1 && ok2 && (old.Spec.Selector == nil) != (cur.Spec.Selector == nil) {
		c.enqueueObject(cur)
	}
}

// onSliceAddOrDelete notes that a created slice has reached the cache and
// resyncs its Endpoints, so that a slice deleted or added by someone else
// is put right.
func (c *Controller) onSliceAddOrDelete(obj any) {
	s, ok := loop.FromTombstone[*discoveryv1.EndpointSlice](obj)
	if !ok || !managedByUs(s) {
		return
	}
	if key, ok := endpointsKey(s); ok {
		c.creations.observe(key, s.Name)
		c.loop.AddAfter(key, c.opts.BatchPeriod)
	}
}

func (c *Controller) onSliceUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	cur, ok2 := newObj.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 || (cur.ResourceVersion != "" && cur.ResourceVersion == old.ResourceVersion) {
		return
	}
	if !managedByUs(old) && !managedByUs(cur) {
		return
	}
	// A slice relabelled to another service or manager matters to the
	// Endpoints it mirrored before as well as to the one it names now.
	oldKey, okOld := endpointsKey(old)
	curKey, okCur := endpointsKey(cur)
	if okOld && oldKey != curKey {
		c.loop.AddAfter(oldKey, c.opts.BatchPeriod)
	}
	if okCur {
		c.loop.AddAfter(curKey, c.opts.BatchPeriod)
	}
}

func managedByUs(s *discoveryv1.EndpointSlice) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == ControllerName
}

// endpointsKey is the key of the Endpoints a slice mirrors, from its
// kubernetes.io/service-name label.
func endpointsKey(s *discoveryv1.EndpointSlice) (string, bool) {
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return "", false
	}
	return s.Namespace + "/" + name, true
}
