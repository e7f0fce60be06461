package statefulset

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"portal.dev/portal/controller/internal/workload"
	"portal.dev/portal/internal/loop"
)

// controllerName is upstream's, which names the work queue.
const controllerName = "statefulset"

// Options configure a Controller. The zero value is ready to use.
type Options struct {
	// Clock judges pod availability (minReadySeconds); nil is the real
	// clock.
	Clock clock.WithTicker
}

// Controller keeps every StatefulSet's pods, revisions and status. Build
// it with New, start the informer factory, then Run it.
type Controller struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	clock     clock.WithTicker
	sets      appslisters.StatefulSetLister
	pods      *workload.ByController[*corev1.Pod]
	revisions *workload.ByController[*appsv1.ControllerRevision]
	loop      *loop.Loop[string]
	podEvents workload.PodHandlers
}

// New returns a controller that reads StatefulSets, Pods and
// ControllerRevisions through factory, writes through client and records
// Events with recorder. Start the factory after New.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, opts Options) *Controller {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	apps, core := factory.Apps().V1(), factory.Core().V1()
	c := &Controller{
		client:    client,
		recorder:  recorder,
		clock:     clk,
		sets:      apps.StatefulSets().Lister(),
		pods:      workload.NewByController[*corev1.Pod](core.Pods().Informer()),
		revisions: workload.NewByController[*appsv1.ControllerRevision](apps.ControllerRevisions().Informer()),
	}
	c.loop = loop.New(loop.Config[string]{
		Name:           controllerName,
		Sync:           c.sync,
		ReportFailures: true,
		Clock:          clk,
	})
	c.loop.WatchOrLog(apps.StatefulSets().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	})
	c.podEvents = workload.PodHandlers{
		Owner: workload.NewOwners(kind.Kind, c.sets.StatefulSets,
			func(set *appsv1.StatefulSet) *metav1.LabelSelector { return set.Spec.Selector }).Key,
		Adopters: c.adopters,
		Enqueue:  c.loop.Add,
	}
	c.loop.WatchOrLog(core.Pods().Informer(), c.podEvents.Funcs())
	c.loop.WaitFor(apps.ControllerRevisions().Informer().HasSynced)
	return c
}

// Run syncs with the given number of workers until ctx ends, then stops
// every goroutine it started, removes its event handlers and returns.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers)
}

// sync brings one StatefulSet's pods, revisions and status to its spec.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return nil // a malformed key never gets better
	}
	set, err := c.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // the garbage collector removes what it owned
	}
	if err != nil {
		return fmt.Errorf("get statefulset %s: %w", key, err)
	}
	if set.DeletionTimestamp != nil {
		// The garbage collector is removing or orphaning its pods; new
		// ones would race it.
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err == nil && selector.Empty() {
		err = errors.New("empty selector would select every pod")
	}
	if err != nil {
		// The API server refuses such a set; one that slipped through
		// must neither crash the controller nor claim every pod.
		c.recorder.Eventf(set, corev1.EventTypeWarning, "InvalidSelector", "invalid selector: %v", err)
		return nil
	}
	pods, err := c.claimPods(ctx, set, selector)
	if err != nil {
		return err
	}
	h, err := c.syncHistory(ctx, set, selector)
	if err != nil {
		return err
	}
	res := Plan(Input{Set: set, Current: h.currentSet, Update: h.updateSet,
		CurrentRevision: h.current.Name, UpdateRevision: h.update.Name,
		CollisionCount: h.collisions, Pods: pods, Now: c.clock.Now()})
	errs := []error{c.carryOut(ctx, set, res), c.writeStatus(ctx, set, res.Status)}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.prune(ctx, set, h.sorted, pods, res.Status); err != nil {
		return err
	}
	if res.RecheckAfter > 0 {
		c.loop.AddAfter(key, res.RecheckAfter)
	}
	return nil
}

// writeStatus writes st when it differs from what set has.
func (c *Controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, st appsv1.StatefulSetStatus) error {
	if equality.Semantic.DeepEqual(set.Status, st) {
		return nil
	}
	cp := set.DeepCopy()
	cp.Status = st
	_, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	klog.FromContext(ctx).V(4).Info("Updated status", "statefulset", klog.KObj(set),
		"replicas", st.Replicas, "ready", st.ReadyReplicas, "updated", st.UpdatedReplicas)
	return nil
}

// recheck is how soon a sync that waits for the cache to catch up with
// the controller's own write tries again.
const recheck = time.Second
