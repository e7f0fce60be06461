package endpointslice

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/util/workqueue"

	"portal.dev/portal/controller/internal/pace"
	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

const (
	// maxRetries is how often a failing Service is retried before it is
	// dropped until its next event (upstream's value).
	maxRetries = 15
	// defaultSyncBackoff and maxSyncBackoff bound the per-Service retry
	// delay. Upstream starts at 1s rather than client-go's 5ms: a failing
	// sync may be a large write, and the API server must not be hammered.
	defaultSyncBackoff = time.Second
	maxSyncBackoff     = 1000 * time.Second
	// defaultSliceEventDelay batches the syncs that slice events cause, so
	// that a burst of edits to a Service's slices costs one sync.
	defaultSliceEventDelay = time.Second
	// staleRetryDelay is how soon a Service whose slices the cache does
	// not show as written yet is looked at again.
	staleRetryDelay = 20 * time.Millisecond
)

// errStale is returned by a sync that found the slice cache behind this
// controller's own writes; the Service is retried instead of written again.
var errStale = errors.New("EndpointSlice cache is behind this controller's writes")

// Options configure a Controller. The zero value is valid.
type Options struct {
	// MaxEndpointsPerSlice caps the endpoints in one slice: 0 means
	// DefaultMaxEndpointsPerSlice, more than 1000 (the API's limit) means 1000.
	MaxEndpointsPerSlice int
	// Registerer receives the controller's Prometheus metrics; nil leaves
	// them unregistered.
	Registerer prometheus.Registerer
	// BatchPeriod is the least time between two syncs of one Service that
	// Pod changes ask for (upstream's --endpointslice-updates-batch-period,
	// except that the first change after a quiet spell is synced at once):
	// changes that keep coming are batched. Zero syncs every change as
	// soon as a worker is free.
	BatchPeriod time.Duration

	// Test knobs; zero means the defaults above and time.Now.
	syncBackoff     time.Duration
	sliceEventDelay time.Duration
	now             func() time.Time
}

// Controller keeps the EndpointSlices of every Service with a selector in
// step with the Pods the selector matches.
type Controller struct {
	client     kubernetes.Interface
	factory    informers.SharedInformerFactory
	services   corelisters.ServiceLister
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	slices     discoverylisters.EndpointSliceLister
	podsByNode *podutil.ByNode
	selecting  *podutil.Selecting

	loop            *loop.Loop[string]
	maxEndpoints    int
	sliceEventDelay time.Duration
	now             func() time.Time

	tracker  sliceTracker
	triggers triggerTimes
	metrics  *metrics
	pace     pace.Pacer[string]

	topoMu    sync.Mutex
	topo      *topology
	topoDirty bool

	pendingMu sync.Mutex
	pending   map[string]time.Time // earliest event not yet synced, by key
}

// New returns a controller that writes through client and reads Services,
// Pods, Nodes and EndpointSlices from factory's informers. It adds its
// event handlers now; Run starts the work.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) *Controller {
	opts = withDefaults(opts)
	c := &Controller{
		client:          client,
		factory:         factory,
		maxEndpoints:    opts.MaxEndpointsPerSlice,
		sliceEventDelay: opts.sliceEventDelay,
		now:             opts.now,
		topoDirty:       true,
		pending:         map[string]time.Time{},
	}
	c.tracker.now = opts.now
	c.pace.Period, c.pace.Now = opts.BatchPeriod, opts.now
	c.loop = loop.New(loop.Config[string]{
		Name:      "endpointslice",
		QueueName: "endpoint_slice",
		Sync:      c.syncKey,
		RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.syncBackoff, maxSyncBackoff),
			// Overall retry rate, not per Service: 10 qps, bursts of 100.
			&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
		),
		MaxRetries: maxRetries,
		Observe:    c.observe,
	})
	c.metrics = newMetrics(c.loop.Len)
	c.loop.Collect(opts.Registerer, c.metrics.collectors()...)
	c.wireInformers()
	return c
}

func withDefaults(opts Options) Options {
	switch {
	case opts.MaxEndpointsPerSlice <= 0:
		opts.MaxEndpointsPerSlice = DefaultMaxEndpointsPerSlice
	case opts.MaxEndpointsPerSlice > maxEndpointsLimit:
		opts.MaxEndpointsPerSlice = maxEndpointsLimit
	}
	if opts.syncBackoff <= 0 {
		opts.syncBackoff = defaultSyncBackoff
	}
	if opts.sliceEventDelay <= 0 {
		opts.sliceEventDelay = defaultSliceEventDelay
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	return opts
}

// Run starts the factory's informers that are not running yet (they stop
// when ctx ends), waits for their caches, and syncs Services with workers
// goroutines until ctx ends. It returns after every worker has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	c.loop.Run(ctx, workers)
}

// syncKey syncs one Service. When the slice cache is behind this
// controller's own write, the Service is looked at again soon, not after
// the failure backoff (a second), which would show up as programming
// latency. The tracker gives up on a write it never sees, so this cannot
// loop for ever. Slice events that arrive during the sync are judged after
// it, once its own writes are known.
func (c *Controller) syncKey(ctx context.Context, key string) error {
	c.pace.Started(key)
	c.tracker.begin(key)
	err := c.sync(ctx, key)
	if c.tracker.end(key) {
		c.enqueue(key, c.sliceEventDelay)
	}
	if errors.Is(err, errStale) {
		return loop.RetryAfter(staleRetryDelay, err)
	}
	return err
}

func (c *Controller) observe(took time.Duration, err error) {
	result := syncResult(err)
	c.metrics.syncDuration.WithLabelValues(result).Observe(took.Seconds())
	c.metrics.syncs.WithLabelValues(result).Inc()
}

func syncResult(err error) string {
	switch {
	case err == nil:
		return "success"
	case errors.Is(err, errStale):
		return "stale"
	default:
		return "error"
	}
}

// enqueue queues a Service, remembering when the first event not yet
// synced arrived; that time stands in for the trigger time of changes that
// carry none of their own.
func (c *Controller) enqueue(key string, delay time.Duration) {
	c.pendingMu.Lock()
	if _, ok := c.pending[key]; !ok {
		c.pending[key] = c.now()
	}
	c.pendingMu.Unlock()
	c.loop.AddAfter(key, delay)
}

// takePending returns and clears key's earliest unsynced event time.
func (c *Controller) takePending(key string) time.Time {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	t := c.pending[key]
	delete(c.pending, key)
	return t
}

// restorePending puts back an event time a failed sync did not consume.
func (c *Controller) restorePending(key string, t time.Time) {
	if t.IsZero() {
		return
	}
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	c.pending[key] = earlier(c.pending[key], t)
}

// topology returns the Node snapshot, rebuilt if a Node event made it old.
func (c *Controller) topology() (*topology, error) {
	c.topoMu.Lock()
	defer c.topoMu.Unlock()
	if !c.topoDirty {
		return c.topo, nil
	}
	nodes, err := c.nodes.List(everything)
	if err != nil {
		return nil, err
	}
	c.topo, c.topoDirty = newTopology(nodes), false
	return c.topo, nil
}

func (c *Controller) markTopologyDirty() {
	c.topoMu.Lock()
	c.topoDirty = true
	c.topoMu.Unlock()
}
