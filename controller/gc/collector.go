// Package gc is Portal's garbage collector: it deletes objects whose owners
// (metadata.ownerReferences) are gone, and carries out the foreground and
// orphan propagation policies the API server records as the
// "foregroundDeletion" and "orphan" finalizers.
//
// It watches the metadata of every served resource that can be listed,
// watched and deleted, and keeps an ownership graph in memory. Before it
// deletes or changes a dependent it reads the dependent live, and an owner
// it has not observed counts as absent only when a live GET answers
// NotFound or an object with another UID, never because a watch has
// not seen it yet. It talks only to the API, through the metadata client;
// what it writes is deletes of dependents, ownerReference patches and the
// removal of the two propagation finalizers.
//
// Its metrics, registered with Options.Registerer while it runs, are
// garbage_collector_deletions_total, garbage_collector_orphanings_total and
// garbage_collector_queue_depth.
//
// Upstream kube-controller-manager's garbage collector is the behaviour
// reference; this one is simpler (the Collector doc lists the deviations).
package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/loop"
	"portal.dev/portal/internal/objintern"
)

// Options configure a Collector. The zero value is usable.
type Options struct {
	// RediscoveryPeriod is how often the served resources are discovered
	// again, to watch resources that appeared; 0 means 30 s.
	RediscoveryPeriod time.Duration
	// SyncTimeout bounds the wait for the resources' first lists before
	// the workers start; 0 means one minute. Deletes rest on live reads, so
	// starting early only costs reads, but a foreground deletion could
	// finish before the dependents of a resource not yet listed are seen.
	SyncTimeout time.Duration
	// IgnoredResources are never watched; nil means core and events.k8s.io
	// events, which churn and are never owners.
	IgnoredResources []schema.GroupResource
	// Registerer receives the collector's Prometheus metrics (for example
	// legacyregistry.Registerer()) while Run runs; nil leaves them
	// unregistered.
	Registerer prometheus.Registerer
}

// DefaultIgnoredResources are the resources a zero Options leaves out.
var DefaultIgnoredResources = []schema.GroupResource{
	{Group: "", Resource: "events"},
	{Group: "events.k8s.io", Resource: "events"},
}

// Collector garbage-collects dependents of absent owners and finishes
// foreground and orphan deletions. Compared with upstream it has no
// "virtual" nodes (the dependent's worker reads the owner itself, with a
// small cache of owners found absent); it deletes a dependent of an owner
// in foreground deletion in the foreground when the dependent's reference
// blocks (upstream: when the dependent has dependents of its own); it has
// no cycle breaking between objects in foreground deletion and no Events
// for invalid cross-namespace references; and it keeps watching a resource
// that disappears from discovery rather than forgetting its objects, so an
// API group going away never makes dependents look orphaned. It keeps no
// informer caches beside its graph (see monitor).
type Collector struct {
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	opts      Options
	graph     graph
	loop      *loop.Loop[types.UID]
	mapper    atomic.Pointer[meta.RESTMapper]
	metrics   *metrics

	mu       sync.Mutex
	monitors map[schema.GroupVersionResource]*monitor
	// reflectors counts the running monitors' reflectors, which Run waits
	// for after the loop has stopped.
	reflectors sync.WaitGroup
}

// New returns a Collector that reads and writes through metadataClient and
// learns the served resources from disc.
func New(metadataClient metadata.Interface, disc discovery.DiscoveryInterface, opts Options) (*Collector, error) {
	if metadataClient == nil || disc == nil {
		return nil, errors.New("garbage collector: a metadata client and a discovery client are required")
	}
	if opts.RediscoveryPeriod <= 0 {
		opts.RediscoveryPeriod = 30 * time.Second
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = time.Minute
	}
	if opts.IgnoredResources == nil {
		opts.IgnoredResources = DefaultIgnoredResources
	}
	c := &Collector{
		metadata:  metadataClient,
		discovery: disc,
		opts:      opts,
		monitors:  map[schema.GroupVersionResource]*monitor{},
	}
	c.loop = loop.New(loop.Config[types.UID]{
		Name:           "garbage_collector",
		Sync:           c.process,
		ReportFailures: true,
		Start:          c.start,
		Background:     []func(context.Context){c.rediscover},
	})
	c.metrics = newMetrics(c.loop.Len)
	c.loop.Collect(opts.Registerer, c.metrics.collectors()...)
	return c, nil
}

// Run watches and collects with the given number of workers until ctx
// ends; it returns when every goroutine it started has stopped. Call it
// once.
func (c *Collector) Run(ctx context.Context, workers int) {
	defer c.reflectors.Wait()
	c.loop.Run(ctx, workers)
}

// start discovers the resources and starts watching them, and waits (at
// most SyncTimeout) for their first lists before the workers start.
func (c *Collector) start(ctx context.Context) error {
	c.syncResources(ctx)
	c.waitForSync(ctx)
	return nil
}

// rediscover refreshes the watched resources every RediscoveryPeriod.
func (c *Collector) rediscover(ctx context.Context) {
	t := time.NewTicker(c.opts.RediscoveryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.syncResources(ctx)
		}
	}
}

// waitForSync waits, at most SyncTimeout, for every resource's first list.
func (c *Collector) waitForSync(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.SyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		klog.InfoS("Garbage collector starting before every resource was listed", "timeout", c.opts.SyncTimeout)
	}
}

// synced reports whether every resource has been listed once.
func (c *Collector) synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.monitors {
		if !m.synced.Load() {
			return false
		}
	}
	return true
}

// syncResources discovers the deletable resources, refreshes the REST
// mapper and starts a monitor for each new resource.
func (c *Collector) syncResources(ctx context.Context) {
	gvrs, err := c.deletableResources()
	if err != nil {
		klog.ErrorS(err, "Discovering resources for garbage collection")
	}
	if groups, err := restmapper.GetAPIGroupResources(c.discovery); len(groups) > 0 {
		m := restmapper.NewDiscoveryRESTMapper(groups)
		c.mapper.Store(&m)
	} else if err != nil {
		klog.ErrorS(err, "Building the REST mapper for garbage collection")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, gvr := range gvrs {
		if _, ok := c.monitors[gvr]; !ok && ctx.Err() == nil {
			c.startMonitorLocked(ctx, gvr)
		}
	}
}

// deletableResources returns the served resources that support list, watch
// and delete, less the ignored ones. A partial discovery failure still
// returns what was discovered.
func (c *Collector) deletableResources() ([]schema.GroupVersionResource, error) {
	lists, err := discovery.ServerPreferredResources(c.discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discover preferred resources: %w", err)
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "watch", "delete"}}, lists)
	set, gvrErr := discovery.GroupVersionResources(lists)
	var out []schema.GroupVersionResource
	for gvr := range set {
		if strings.Contains(gvr.Resource, "/") || c.ignored(gvr.GroupResource()) {
			continue
		}
		out = append(out, gvr)
	}
	return out, errors.Join(err, gvrErr)
}

func (c *Collector) ignored(gr schema.GroupResource) bool {
	return slices.Contains(c.opts.IgnoredResources, gr)
}

// startMonitorLocked starts feeding the graph with the objects of gvr.
func (c *Collector) startMonitorLocked(ctx context.Context, gvr schema.GroupVersionResource) {
	m := &monitor{c: c, resource: &gvr}
	r := m.newReflector()
	c.monitors[gvr] = m
	c.reflectors.Go(func() { r.RunWithContext(ctx) })
	klog.V(2).InfoS("Garbage collector watching", "resource", gvr.String())
}

// observe records an added or updated object in the graph.
func (c *Collector) observe(gvr *schema.GroupVersionResource, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	c.enqueue(c.graph.upsert(toObject(gvr, m)))
}

// forget removes a deleted object from the graph.
func (c *Collector) forget(obj any) {
	if m, ok := loop.FromTombstone[*metav1.PartialObjectMetadata](obj); ok {
		c.enqueue(c.graph.remove(m.UID))
	}
}

func (c *Collector) enqueue(uids []types.UID) {
	for _, uid := range uids {
		c.loop.Add(uid)
	}
}

// internTable holds the namespaces and owner references the graph's
// objects share.
var internTable objintern.Table

// toObject converts an object's metadata into the graph's form, which is
// all the collector keeps of it: the graph holds one object for every
// object of every resource for as long as it exists, so the strings that
// repeat between objects (namespaces, owner references) are shared.
func toObject(gvr *schema.GroupVersionResource, m *metav1.PartialObjectMetadata) object {
	shared := metav1.ObjectMeta{Namespace: m.Namespace, OwnerReferences: m.OwnerReferences}
	internTable.Meta(&shared)
	return object{
		Resource:   gvr,
		Namespace:  shared.Namespace,
		Name:       m.Name,
		UID:        m.UID,
		Owners:     shared.OwnerReferences,
		Deleting:   m.DeletionTimestamp != nil,
		Foreground: hasFinalizer(m, finalizerForeground),
		Orphan:     hasFinalizer(m, finalizerOrphan),
	}
}

func hasFinalizer(m metav1.Object, f string) bool {
	return slices.Contains(m.GetFinalizers(), f)
}
