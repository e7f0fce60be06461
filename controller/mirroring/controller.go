package mirroring

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/loop"
)

const (
	controllerName = "endpointslice-mirroring-controller"

	// fieldManager is the field manager mirrored slices are written as.
	fieldManager = "endpointslicemirroring-controller"

	// maxRetries is how often a failing Endpoints is retried before it is
	// dropped until its next change.
	maxRetries = 15
)

// errStaleCache asks for a retry: the informer has not yet shown a slice
// this controller created.
var errStaleCache = errors.New("endpointslice cache is missing a slice created by this controller")

// Options configure a Controller. The zero value is ready to use.
type Options struct {
	// MaxEndpointsPerSubset caps the addresses mirrored from one Endpoints
	// subset; zero means DefaultMaxEndpointsPerSubset (1000).
	MaxEndpointsPerSubset int
	// BatchPeriod delays syncs caused by EndpointSlice changes, so that a
	// burst of them becomes one sync (kube-controller-manager's
	// --mirroring-endpointslice-updates-batch-period). Zero syncs at once.
	BatchPeriod time.Duration
	// Registerer receives the controller's Prometheus metrics while it
	// runs; nil leaves them unregistered.
	Registerer prometheus.Registerer
}

// Controller mirrors the Endpoints of selector-less Services into
// EndpointSlices. Build it with New, start the informer factory, then Run.
type Controller struct {
	client    kubernetes.Interface
	opts      Options
	endpoints corelisters.EndpointsLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	loop      *loop.Loop[string]
	metrics   *metrics
	creations creations
}

// New returns a controller that reads Endpoints, Services and
// EndpointSlices through factory and writes EndpointSlices through
// client. It registers its informers on factory, so start the factory
// after New.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) *Controller {
	if opts.MaxEndpointsPerSubset <= 0 {
		opts.MaxEndpointsPerSubset = DefaultMaxEndpointsPerSubset
	}
	core, discovery := factory.Core().V1(), factory.Discovery().V1()
	c := &Controller{
		client:    client,
		opts:      opts,
		endpoints: core.Endpoints().Lister(),
		services:  core.Services().Lister(),
		slices:    discovery.EndpointSlices().Lister(),
	}
	c.loop = loop.New(loop.Config[string]{
		Name:        controllerName,
		QueueName:   "endpoint_slice_mirroring",
		Sync:        c.sync,
		RateLimiter: rateLimiter(),
		MaxRetries:  maxRetries,
		Observe:     func(took time.Duration, _ error) { c.metrics.syncDuration.Observe(took.Seconds()) },
	})
	c.metrics = newMetrics(c.loop.Len)
	c.loop.Collect(opts.Registerer, c.metrics.collectors()...)
	c.loop.WatchOrLog(core.Endpoints().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onEndpoints,
		UpdateFunc: c.onEndpointsUpdate,
		DeleteFunc: c.onEndpoints,
	})
	c.loop.WatchOrLog(core.Services().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onService,
		UpdateFunc: c.onServiceUpdate,
		DeleteFunc: c.onService,
	})
	c.loop.WatchOrLog(discovery.EndpointSlices().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onSliceAddOrDelete,
		UpdateFunc: c.onSliceUpdate,
		DeleteFunc: c.onSliceAddOrDelete,
	})
	return c
}

// rateLimiter backs off from 1 s (not the usual 5 ms): a retry may
// rewrite many slices, and the API server should not pay for a hot loop.
func rateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 100*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// Run syncs with the given number of workers until ctx ends, then stops
// every goroutine it started, removes its event handlers and returns.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers)
}

// sync makes the mirrored slices of one Endpoints match it, or removes
// them when it should not be mirrored.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return nil // a malformed key never gets better
	}
	ep, mirror, err := c.source(ns, name)
	if err != nil {
		return err
	}
	if !mirror {
		return c.deleteMirrored(ctx, key)
	}
	existing, err := c.mirrored(ns, name)
	if err != nil {
		return err
	}
	if c.creations.unseen(key, names(existing), time.Now()) {
		return errStaleCache
	}
	desired, skipped := Desired(ep, c.opts.MaxEndpointsPerSubset)
	c.metrics.addressesSkipped.Observe(float64(skipped.InvalidIP + skipped.OverLimit))
	if skipped != (Skipped{}) {
		klog.FromContext(ctx).Info("Addresses not mirrored", "endpoints", klog.KObj(ep),
			"invalidIP", skipped.InvalidIP, "overLimit", skipped.OverLimit, "limit", c.opts.MaxEndpointsPerSubset)
	}
	return c.apply(ctx, key, ep, Reconcile(desired, existing))
}

// source returns the Endpoints behind key and whether it is to be
// mirrored: it exists, is not marked skip-mirror, and its Service exists
// without a selector (Services with one get slices from the EndpointSlice
// controller).
func (c *Controller) source(ns, name string) (*corev1.Endpoints, bool, error) {
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get endpoints %s/%s: %w", ns, name, err)
	}
	if !ShouldMirror(ep) {
		return ep, false, nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return ep, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get service %s/%s: %w", ns, name, err)
	}
	return ep, svc.Spec.Selector == nil, nil
}

// mirrored lists the slices this controller made for an Endpoints; slices
// with another managed-by label are never seen, so never touched.
func (c *Controller) mirrored(ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	sel := labels.SelectorFromValidatedSet(labels.Set{
		discoveryv1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:   ControllerName,
	})
	list, err := c.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return nil, fmt.Errorf("list mirrored endpointslices of %s/%s: %w", ns, name, err)
	}
	return list, nil
}

func names(list []*discoveryv1.EndpointSlice) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.Name
	}
	return out
}
