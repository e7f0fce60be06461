package endpointslice

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

var everything = labels.Everything()

// wireInformers takes the listers and adds the event handlers.
func (c *Controller) wireInformers() {
	svcInf := c.factory.Core().V1().Services()
	podInf := c.factory.Core().V1().Pods()
	nodeInf := c.factory.Core().V1().Nodes()
	sliceInf := c.factory.Discovery().V1().EndpointSlices()
	c.services, c.pods, c.nodes, c.slices = svcInf.Lister(), podInf.Lister(), nodeInf.Lister(), sliceInf.Lister()
	c.podsByNode = podutil.NewByNode(podInf.Informer())
	c.selecting = podutil.NewSelecting(svcInf.Informer())

	c.loop.WatchOrLog(svcInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onService,
		UpdateFunc: func(_, cur any) { c.onService(cur) },
		DeleteFunc: c.onService,
	})
	c.loop.WatchOrLog(podInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPod(nil, obj) },
		UpdateFunc: c.onPod,
		DeleteFunc: func(obj any) { c.onPod(nil, obj) },
	})
	c.loop.WatchOrLog(nodeInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onNode(nil, obj) },
		UpdateFunc: c.onNode,
		DeleteFunc: func(obj any) { c.onNode(nil, obj) },
	})
	c.loop.WatchOrLog(sliceInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onSlice(nil, obj) },
		UpdateFunc: c.onSlice,
		DeleteFunc: c.onSliceDelete,
	})
}

func (c *Controller) onService(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.enqueue(key, 0)
}

// onPod queues the Services a Pod change matters to: those whose selector
// matches the Pod now or, when its labels changed, matched it before.
func (c *Controller) onPod(oldObj, curObj any) {
	// Until the caches have synced, every Service is queued by its own
	// add event and will read its pods from the synced lister; mapping each
	// of the first list's pods to Services would cost pods x Services
	// selector matches for nothing (seconds with 10,000 pods).
	if !c.loop.HasSynced() {
		return
	}
	cur, old := podOf(curObj), podOf(oldObj)
	if cur == nil {
		return
	}
	if _, tomb := curObj.(cache.DeletedFinalStateUnknown); !tomb && !includePod(cur) && (old == nil || !includePod(old)) {
		// In no slice before or after: a Pod created, scheduled or deleted
		// without an address changes no endpoint. A missed deletion's last
		// state may be older than the slices, so it is always looked at.
		return
	}
	keys := c.servicesFor(cur.Namespace, cur.Labels)
	if old != nil {
		changed := podChanged(old, cur)
		if maps.Equal(old.Labels, cur.Labels) {
			if !changed {
				return
			}
		} else {
			keys = affectedServices(c.servicesFor(old.Namespace, old.Labels), keys, changed)
		}
	}
	for _, k := range keys {
		c.enqueue(k, c.pace.Delay(k))
	}
}

// affectedServices is the union of the Services matching the old and new
// labels when the endpoint itself changed, else only those that gained or
// lost the Pod.
func affectedServices(before, after []string, changed bool) []string {
	if changed {
		return union(before, after)
	}
	var out []string
	for _, k := range union(before, after) {
		if slices.Contains(before, k) != slices.Contains(after, k) {
			out = append(out, k)
		}
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// podChanged reports whether the Pod changed in a way its endpoint shows.
// Informer resyncs and status noise (container restarts, probes that don't
// flip readiness) don't count.
func podChanged(old, cur *corev1.Pod) bool {
	return (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		podutil.IsReady(old) != podutil.IsReady(cur) ||
		includePod(old) != includePod(cur) ||
		!slices.Equal(old.Status.PodIPs, cur.Status.PodIPs) ||
		old.Status.PodIP != cur.Status.PodIP ||
		old.Spec.NodeName != cur.Spec.NodeName ||
		old.Spec.Hostname != cur.Spec.Hostname ||
		old.Spec.Subdomain != cur.Spec.Subdomain
}

// servicesFor returns the keys of the Services in ns whose selector
// matches podLabels. A nil selector matches nothing.
func (c *Controller) servicesFor(ns string, podLabels map[string]string) []string {
	keys, err := c.selecting.Keys(ns, podLabels)
	if err != nil {
		utilruntime.HandleError(err)
	}
	return keys
}

// onNode reacts to what a Node change means for endpoints: a new zone (or
// a Node appearing or going) changes the endpoints of the Pods on it, and
// any change to zones, readiness or CPU changes Auto hints.
func (c *Controller) onNode(oldObj, curObj any) {
	cur, old := nodeOf(curObj), nodeOf(oldObj)
	if cur == nil {
		return
	}
	addOrDelete := old == nil
	zoneChanged := addOrDelete || old.Labels[corev1.LabelTopologyZone] != cur.Labels[corev1.LabelTopologyZone]
	if !zoneChanged && !topologyChanged(old, cur) {
		return
	}
	c.markTopologyDirty()
	if !c.loop.HasSynced() {
		return
	}
	if zoneChanged {
		for _, k := range c.servicesOnNode(cur.Name) {
			c.enqueue(k, 0)
		}
	}
	for _, k := range c.autoHintServices() {
		c.enqueue(k, 0)
	}
}

// topologyChanged compares what Auto hints read from a Node besides zone.
func topologyChanged(old, cur *corev1.Node) bool {
	return nodeReady(old) != nodeReady(cur) ||
		excludedNode(old) != excludedNode(cur) ||
		!old.Status.Allocatable.Cpu().Equal(*cur.Status.Allocatable.Cpu())
}

// servicesOnNode returns the Services selecting any Pod on the Node.
func (c *Controller) servicesOnNode(node string) []string {
	pods, err := c.podsByNode.On(node)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("pods on node %s: %w", node, err))
		return nil
	}
	var keys []string
	for _, pod := range pods {
		keys = union(keys, c.servicesFor(pod.Namespace, pod.Labels))
	}
	return keys
}

// autoHintServices returns the Services with topology-mode Auto.
func (c *Controller) autoHintServices() []string {
	svcs, err := c.services.List(everything)
	if err != nil {
		utilruntime.HandleError(err)
		return nil
	}
	var keys []string
	for _, svc := range svcs {
		if autoHintsEnabled(svc.Annotations) {
			keys = append(keys, svc.Namespace+"/"+svc.Name)
		}
	}
	return keys
}

// onSlice queues a slice's Service when the change is not our own write
// already reflected: a slice we never wrote or one changed since, a slice
// moved to or from our management, or one moved to another Service.
func (c *Controller) onSlice(oldObj, curObj any) {
	cur, _ := curObj.(*discovery.EndpointSlice)
	old, _ := oldObj.(*discovery.EndpointSlice)
	if cur == nil {
		return
	}
	key, ok := serviceKey(cur)
	if old != nil {
		oldKey, oldOK := serviceKey(old)
		if oldKey != key || managedByUs(old) != managedByUs(cur) {
			if oldOK && managedByUs(old) {
				c.enqueue(oldKey, c.sliceEventDelay)
			}
			if ok {
				c.enqueue(key, c.sliceEventDelay)
			}
			return
		}
	}
	if ok && managedByUs(cur) && !c.tracker.hold(key, cur, false) && c.tracker.shouldSync(key, cur) {
		c.enqueue(key, c.sliceEventDelay)
	}
}

// onSliceDelete queues the Service when one of our slices went away by
// someone else's hand.
func (c *Controller) onSliceDelete(obj any) {
	s, ok := loop.FromTombstone[*discovery.EndpointSlice](obj)
	if !ok || !managedByUs(s) {
		return
	}
	if key, ok := serviceKey(s); ok && !c.tracker.hold(key, s, true) && !c.tracker.observeDeletion(key, s) {
		c.enqueue(key, c.sliceEventDelay)
	}
}

func managedByUs(s *discovery.EndpointSlice) bool {
	return s.Labels[discovery.LabelManagedBy] == ControllerName
}

// serviceKey is the key of the Service a slice is labelled for.
func serviceKey(s *discovery.EndpointSlice) (string, bool) {
	name := s.Labels[discovery.LabelServiceName]
	return s.Namespace + "/" + name, name != ""
}

func podOf(obj any) *corev1.Pod {
	pod, _ := loop.FromTombstone[*corev1.Pod](obj)
	return pod
}

func nodeOf(obj any) *corev1.Node {
	node, _ := loop.FromTombstone[*corev1.Node](obj)
	return node
}
