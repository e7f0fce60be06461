package apiserver

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	etcdkube "go.etcd.io/etcd/client/v3/kubernetes"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver/etcdretry"
	"portal.dev/portal/apiserver/snapshotwindow"
	"portal.dev/portal/internal/objintern"
)

// etcdStorage builds the resources' storage on one etcd client that every
// store shares, instead of the generic server's backend, which dials etcd
// anew for each resource from its URLs. With the embedded etcd the client
// is the in-process one: a create then costs no TLS, gRPC framing or socket
// round trip to etcd, and neither does the watch that feeds the watch
// cache (health checks and other API servers still use the TLS port).
// Either way the stores report the watch caches' snapshot window as their
// compaction (see snapshotwindow), which the generic backend cannot. It is
// what k8s.io/apiserver's StorageWithCacher and its etcd3 factory build,
// with that client.
type etcdStorage struct {
	generic.RESTOptionsGetter
	client             *etcdkube.Client
	compactionInterval time.Duration
	// closeClient, when set, closes the client once the last store is
	// destroyed: the client was made for the stores alone.
	closeClient bool

	mu        sync.Mutex
	stores    int // open stores; the compactor stops with the last
	compactor etcd3.Compactor
	// snapshotWindow is how long the watch caches keep their store
	// snapshots: the event history window.
	snapshotWindow time.Duration
	// window is what the stores report as compacted, so that the watch
	// caches keep their snapshots for a bounded time (see
	// snapshotwindow); stopWindow ends its sampling and waits for it.
	window     *snapshotwindow.Compactor
	stopWindow context.CancelFunc

	// cacheMaps holds the label and annotation maps the watch caches'
	// objects share (see cacheAttrs).
	cacheMaps objintern.Table
}

func newEtcdStorage(inner generic.RESTOptionsGetter, client *clientv3.Client, compactionInterval time.Duration) *etcdStorage {
	// Latency metrics per request, as the factory does.
	client.KV = etcd3.NewETCDLatencyTracker(client.KV)
	kc := &etcdkube.Client{Client: client}
	// A write the loss of the etcd leader left of unknown outcome is sent
	// again and acknowledged if it had landed (see etcdretry).
	kc.Kubernetes = etcdretry.Client{Interface: kc}
	// etcd3.New asks the shared feature checker to probe the client's
	// endpoints for RequestWatchProgress; without it the watch cache
	// serves neither consistent reads nor streaming lists. An in-process
	// client has no endpoints, so nothing would be probed: probe it under
	// a name.
	var probed interface {
		Endpoints() []string
		Status(context.Context, string) (*clientv3.StatusResponse, error)
	} = client
	if len(client.Endpoints()) == 0 {
		probed = namedClient{client}
	}
	etcdfeature.DefaultFeatureSupportChecker.CheckClient(context.Background(), probed, storage.RequestWatchProgress)
	disableSizeEstimates()
	return &etcdStorage{RESTOptionsGetter: inner, client: kc, compactionInterval: compactionInterval,
		snapshotWindow: storagebackend.DefaultEventsHistoryWindow}
}

// disableSizeEstimates turns off k8s.io/apiserver's SizeBasedListCostEstimate
// gate before any store is built. With it on, every watch cache makes its
// etcd store remember the size and revision of every key it sees (about
// 130 bytes per object, kept while the object exists) to estimate the
// average object size. Only API Priority and Fairness's list cost and the
// apiserver_resource_size_estimate_bytes gauge read that estimate, and
// Portal's API server runs without Priority and Fairness (its Config has
// no FlowControl: max-in-flight limits only), so the memory buys nothing.
// The object counts (apiserver_storage_objects) still come from etcd.
// Portal has no --feature-gates flag, so nothing turns the gate back on.
func disableSizeEstimates() {
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{
		string(features.SizeBasedListCostEstimate): false,
	}); err != nil {
		klog.ErrorS(err, "Turning off the list size estimates")
	}
}

// namedClient gives the in-process client an endpoint name for the
// feature checker; its Status answers for the one local member whatever
// the endpoint.
type namedClient struct{ *clientv3.Client }

func (namedClient) Endpoints() []string { return []string{"in-process"} }

// GetRESTOptions is the wrapped getter's options with storage on the
// shared client (see withCacher).
func (g *etcdStorage) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	opts.Decorator = g.withCacher
	return opts, nil
}

// snapshotSampling is how often the snapshot window reads etcd's
// revision: snapshots live up to that much longer than the window.
const snapshotSampling = 5 * time.Second

// openCompactor returns the one compactor every store shares, starting it
// for the first store: etcd's, seen through the watch caches' snapshot
// window, which is the watch cache's event history window.
func (g *etcdStorage) openCompactor() etcd3.Compactor {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stores == 0 {
		var etcdCompactor etcd3.Compactor
		if g.compactionInterval > 0 {
			g.compactor = etcd3.StartCompactorPerEndpoint(g.client.Client, g.compactionInterval)
			etcdCompactor = g.compactor
		}
		g.window = snapshotwindow.New(etcdCompactor, g.snapshotWindow)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.window.Run(ctx, snapshotSampling, g.currentRevision)
		}()
		g.stopWindow = func() { cancel(); <-done }
	}
	g.stores++
	return g.window
}

// currentRevision is etcd's revision now.
func (g *etcdStorage) currentRevision(ctx context.Context) (int64, error) {
	resp, err := g.client.Client.KV.Get(ctx, "compact_rev_key", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// closeCompactor stops the compactor once the last store is destroyed.
func (g *etcdStorage) closeCompactor() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stores--
	if g.stores == 0 && g.stopWindow != nil {
		g.stopWindow()
		g.window, g.stopWindow = nil, nil
	}
	if g.stores == 0 && g.compactor != nil {
		if c, ok := g.compactor.(interface{ Stop() }); ok {
			c.Stop()
		}
		g.compactor = nil
	}
	if g.stores == 0 && g.closeClient {
		g.client.Close()
		g.closeClient = false
	}
}

func (g *etcdStorage) raw(c *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error) {
	transformer := c.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := storage.APIObjectVersioner{}
	decoder := etcd3.NewDefaultDecoder(c.Codec, versioner)
	compactor := g.openCompactor()
	store, err := etcd3.New(g.client, compactor, c.Codec, newFunc, newListFunc, c.Prefix, resourcePrefix,
		c.GroupResource, transformer, c.LeaseManagerConfig, decoder, versioner)
	if err != nil {
		g.closeCompactor()
		return nil, nil, err
	}
	var once sync.Once
	return store, func() {
		once.Do(func() {
			store.Close()
			g.closeCompactor()
		})
	}, nil
}

// withCacher is genericregistry.StorageWithCacher on raw.
func (g *etcdStorage) withCacher(c *storagebackend.ConfigForResource, resourcePrefix string,
	keyFunc func(obj runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
	getAttrsFunc storage.AttrFunc, triggerFuncs storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
	s, destroy, err := g.raw(c, newFunc, newListFunc, resourcePrefix)
	if err != nil {
		return nil, nil, err
	}
	cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage:             s,
		Versioner:           storage.APIObjectVersioner{},
		GroupResource:       c.GroupResource,
		EventsHistoryWindow: c.EventsHistoryWindow,
		ResourcePrefix:      resourcePrefix,
		KeyFunc:             keyFunc,
		NewFunc:             newFunc,
		NewListFunc:         newListFunc,
		GetAttrsFunc:        g.cacheAttrs(getAttrsFunc),
		IndexerFuncs:        triggerFuncs,
		Indexers:            indexers,
		Codec:               c.Codec,
	})
	if err != nil {
		destroy()
		return nil, func() {}, err
	}
	delegator := cacherstorage.NewCacheDelegator(cacher, s)
	var once sync.Once
	return delegator, func() {
		once.Do(func() {
			delegator.Stop()
			cacher.Stop()
			destroy()
		})
	}, nil
}

// cacheAttrs is getAttrs for the watch cache, which calls it on each object
// as the object enters the cache, before anything else sees it: the object
// first shares its labels and annotations with the cached objects that have
// equal ones. Objects of one ReplicaSet, or written alike by one client,
// then keep one map instead of one each. The watch cache's objects are
// read-only (every reader gets them, and updates get them as the existing
// object), so no one changes a shared map in place.
func (g *etcdStorage) cacheAttrs(getAttrs storage.AttrFunc) storage.AttrFunc {
	if getAttrs == nil {
		return nil
	}
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		g.cacheMaps.ShareMaps(obj)
		return getAttrs(obj)
	}
}
