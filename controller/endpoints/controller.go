package endpoints

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"portal.dev/portal/controller/internal/pace"
	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

const (
	controllerName = "endpoint-controller"

	// maxRetries is how often a failing Service is retried before it is
	// dropped until its next change; with the default rate limiter the
	// last retry comes about 80 s after the first failure.
	maxRetries = 15
)

// Options configure a Controller. The zero value is ready to use.
type Options struct {
	// BatchPeriod is the least time between two syncs of one Service that
	// pod changes ask for (kube-controller-manager's
	// --endpoint-updates-batch-period, except that the first change after
	// a quiet spell is synced at once): a burst of pod updates becomes a
	// few writes instead of one per pod. Zero syncs every change as soon
	// as a worker is free.
	BatchPeriod time.Duration
	// Registerer receives the controller's Prometheus metrics while it
	// runs; nil leaves them unregistered.
	Registerer prometheus.Registerer
}

// Controller keeps the Endpoints of Services with a selector in step with
// their pods. Build it with New, start the informer factory, then Run it.
type Controller struct {
	client    kubernetes.Interface
	opts      Options
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	selecting *podutil.Selecting
	loop      *loop.Loop[string]
	triggers  triggerTimes
	metrics   *metrics
	pace      pace.Pacer[string]

	mu sync.Mutex
	// goneWithSelector holds keys of Services deleted while they had a
	// selector: their Endpoints were ours even if managedFields do not
	// say so (an API server that does not track them).
	goneWithSelector map[string]bool
	// written holds the fingerprint of this controller's last write of
	// each Endpoints, noted before the write is sent, so that the event
	// the write causes is not taken for someone else's edit and synced
	// again, however soon it arrives.
	written map[string]uint64
}

// New returns a controller that reads Services, Pods and Endpoints through
// factory and writes Endpoints through client. It registers its informers
// on factory, so start the factory after New.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) *Controller {
	core := factory.Core().V1()
	c := &Controller{
		client:           client,
		opts:             opts,
		services:         core.Services().Lister(),
		pods:             core.Pods().Lister(),
		endpoints:        core.Endpoints().Lister(),
		selecting:        podutil.NewSelecting(core.Services().Informer()),
		goneWithSelector: map[string]bool{},
		written:          map[string]uint64{},
	}
	c.pace.Period = opts.BatchPeriod
	c.loop = loop.New(loop.Config[string]{
		Name:       controllerName,
		QueueName:  "endpoint",
		Sync:       c.sync,
		MaxRetries: maxRetries,
		Observe:    func(took time.Duration, _ error) { c.metrics.syncDuration.Observe(took.Seconds()) },
		Start:      c.enqueueLeftovers,
	})
	c.metrics = newMetrics(c.loop.Len)
	c.loop.Collect(opts.Registerer, c.metrics.collectors()...)
	c.loop.WatchOrLog(core.Services().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueObject,
		UpdateFunc: func(_, cur any) { c.enqueueObject(cur) },
		DeleteFunc: c.onServiceDelete,
	})
	c.loop.WatchOrLog(core.Pods().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onPodAddOrDelete,
		UpdateFunc: c.onPodUpdate,
		DeleteFunc: c.onPodAddOrDelete,
	})
	c.loop.WatchOrLog(core.Endpoints().Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: c.onEndpointsUpdate,
		DeleteFunc: c.enqueueObject,
	})
	return c
}

// Run syncs with the given number of workers until ctx ends, then stops
// every goroutine it started, removes its event handlers and returns.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers)
}

// enqueueLeftovers queues every Endpoints once at start, so that those
// whose Service was deleted while no controller ran are found.
func (c *Controller) enqueueLeftovers(context.Context) error {
	eps, err := c.endpoints.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: list endpoints: %w", controllerName, err))
		return nil
	}
	for _, ep := range eps {
		if !hasLeaderElection(ep) {
			c.add(ep.Namespace + "/" + ep.Name)
		}
	}
	return nil
}

// sync brings the Endpoints of one Service to what its pods say.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return nil // a malformed key never gets better
	}
	if ns == metav1.NamespaceDefault && name == "kubernetes" {
		return nil // the API server maintains it
	}
	c.pace.Started(key)
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.pace.Forget(key)
		return c.deleteOrphan(ctx, ns, name)
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil {
		return nil // no endpoints, or endpoints someone else writes
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return fmt.Errorf("list pods of service %s: %w", key, err)
	}
	// Computed on every sync, also no-op ones, so the tracker's idea of
	// "changed since last time" stays current.
	trigger := c.triggers.compute(key, svc, pods)
	current, err := c.endpoints.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) {
		current, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("get endpoints %s: %w", key, err)
	}
	desired := Desired(svc, pods, current, trigger)
	if !NeedsUpdate(current, desired) {
		return nil
	}
	return c.write(ctx, current, desired)
}

// write creates or updates the Endpoints. Updates carry the cached
// resourceVersion, so a stale cache ends in a conflict and a retry rather
// than in overwriting a newer object.
func (c *Controller) write(ctx context.Context, current, desired *corev1.Endpoints) error {
	api := c.client.CoreV1().Endpoints(desired.Namespace)
	key := desired.Namespace + "/" + desired.Name
	c.setWritten(key, fingerprint(desired))
	op := "update"
	var err error
	if current == nil {
		op = "create"
		_, err = api.Create(ctx, desired, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // creates keep failing until the namespace is gone
		}
	} else {
		_, err = api.Update(ctx, desired, metav1.UpdateOptions{FieldManager: FieldManager})
	}
	if err != nil {
		return fmt.Errorf("%s endpoints %s: %w", op, key, err)
	}
	c.metrics.changes.WithLabelValues(op).Inc()
	ready, notReady := countAddresses(desired.Subsets)
	klog.FromContext(ctx).V(4).Info("Wrote endpoints", "operation", op,
		"endpoints", klog.KObj(desired), "ready", ready, "notReady", notReady)
	return nil
}

// deleteOrphan deletes the Endpoints of a deleted Service if this
// controller wrote them; user-managed Endpoints stay.
func (c *Controller) deleteOrphan(ctx context.Context, ns, name string) error {
	key := ns + "/" + name
	c.triggers.forget(key)
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.setGone(key, false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get endpoints %s: %w", key, err)
	}
	if hasLeaderElection(ep) || !(CreatedByController(ep) || c.isGone(key)) {
		return nil
	}
	opts := metav1.DeleteOptions{}
	if ep.UID != "" {
		// Never delete a same-named object created since the cache saw ours.
		opts.Preconditions = &metav1.Preconditions{UID: &ep.UID}
	}
	err = c.client.CoreV1().Endpoints(ns).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete endpoints %s: %w", key, err)
	}
	if err == nil {
		c.metrics.changes.WithLabelValues("delete").Inc()
	}
	c.setGone(key, false)
	return nil
}

func (c *Controller) setGone(key string, gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gone {
		c.goneWithSelector[key] = true
	} else {
		delete(c.goneWithSelector, key)
		delete(c.written, key)
	}
}

// setWritten remembers the fingerprint of this controller's write.
func (c *Controller) setWritten(key string, fp uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[key] = fp
}

// isOwnWrite reports whether ep holds what this controller last wrote (or
// is writing) to key's Endpoints. An edit that leaves ep so is nothing to
// undo; a failed write leaves an entry that only matches an object already
// as the controller wants it.
func (c *Controller) isOwnWrite(key string, ep *corev1.Endpoints) bool {
	fp := fingerprint(ep)
	c.mu.Lock()
	defer c.mu.Unlock()
	written, ok := c.written[key]
	return ok && written == fp
}

func (c *Controller) isGone(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goneWithSelector[key]
}

func hasLeaderElection(ep *corev1.Endpoints) bool {
	_, ok := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return ok
}
