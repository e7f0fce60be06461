// Package proxy is Portal's service proxy for one node: it watches
// Services, EndpointSlices and its own Node through the API, keeps an
// immutable snapshot of them, and has a proxy mode program the data
// plane to match, coalescing changes and resyncing periodically. It also
// serves /healthz, /livez, /metrics and the healthCheckNodePorts. The
// modes (proxy/nftables today) implement Proxier and know nothing of the
// API; this package knows nothing of how a mode programs the kernel. It
// talks to the cluster only through the client it is given.
//
// Off Linux only the userspace mode runs, without its VIP link
// (kernel_other.go): the kernel modes and --cleanup fail, saying so.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/proxy/changetracker"
	"portal.dev/portal/proxy/conntrack"
	"portal.dev/portal/proxy/healthcheck"
	"portal.dev/portal/proxy/metrics"
	"portal.dev/portal/proxy/runner"
	"portal.dev/portal/proxy/snapshot"
	"portal.dev/portal/proxy/status"
	"portal.dev/portal/proxy/userspace"
)

// Proxier is a proxy mode: it programs a data plane to match snapshots.
type Proxier interface {
	// Sync programs req.Snapshot. The core calls it from one goroutine,
	// never concurrently. After an error the next request is Full.
	Sync(ctx context.Context, req snapshot.Request) error
	// Cleanup removes everything the mode wrote.
	Cleanup(ctx context.Context) error
}

// Labels that take a Service (and its slices) away from this proxy, as
// in kube-proxy: another proxy implementation serves it, or it is
// headless and has nothing to proxy.
const (
	labelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	labelHeadless         = "service.kubernetes.io/headless"
)

// Proxy is the service proxy of one node.
type Proxy struct {
	client   kubernetes.Interface
	opts     Options
	hostname string
	nodePort nodePortSpec
	proxier  Proxier
	ct       *conntrack.Cleaner // nil for modes that need no conntrack cleanup
	metrics  *metrics.Metrics
	health   *healthcheck.ProxyHealth
	hc       *healthcheck.ServiceServers
	hcHosts  string // the addresses hc listens on, joined
	local    func() ([]netip.Addr, error)
	runner   *runner.Runner

	services  changetracker.ServiceTracker
	endpoints *changetracker.EndpointsTracker
	node      nodeTracker

	// The sync state below belongs to the runner's goroutine.
	last           *snapshot.Snapshot // newest snapshot built
	synced         *snapshot.Snapshot // newest snapshot programmed
	pendingChanged map[types.NamespacedName]struct{}
	pendingTrigger map[types.NamespacedName][]time.Time
	needFull       bool
	lastFull       time.Time // when the last full sync succeeded

	ready atomic.Bool
	// book is what the syncs programmed, for the status endpoint.
	book status.Book
	// traffic is the last reading of the mode's counters.
	traffic trafficCache
}

// New returns the proxy for the node the options name, using client to
// watch the API. Nothing runs until Run. With o.Cleanup, client may be
// nil and Run only removes Portal's rules.
func New(client kubernetes.Interface, o Options) (*Proxy, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Cleanup {
		return &Proxy{opts: o}, nil
	}
	cidrs, _ := parseClusterCIDRs(o.ClusterCIDR)
	if o.Mode == ModeUserspace {
		// The userspace mode registers its data-path metrics on the
		// proxy's registry, so it is made once the proxy is.
		p, err := newProxy(client, o, nil, nil, localAddrs)
		if err != nil {
			return nil, err
		}
		cfg := userspace.Config{
			Scheduler:    o.Scheduler,
			DrainTimeout: o.DrainTimeout,
			Registerer:   p.metrics.Registry,
		}
		addVIPLink(&cfg)
		p.proxier = userspace.New(cfg)
		return p, nil
	}
	proxier, ct, err := newKernelProxier(o, cidrs)
	if err != nil {
		return nil, err
	}
	return newProxy(client, o, proxier, ct, localAddrs)
}

// newProxy wires a proxy around a given mode; tests use it with fakes.
func newProxy(client kubernetes.Interface, o Options, proxier Proxier, ct conntrack.Interface, local func() ([]netip.Addr, error)) (*Proxy, error) {
	o = o.withDefaults()
	hostname, err := o.hostname()
	if err != nil {
		return nil, err
	}
	spec, err := parseNodePortAddresses(o.NodePortAddresses)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		client:         client,
		opts:           o,
		hostname:       hostname,
		nodePort:       spec,
		proxier:        proxier,
		metrics:        metrics.New(),
		local:          local,
		endpoints:      changetracker.NewEndpointsTracker(hostname, time.Now()),
		pendingChanged: map[types.NamespacedName]struct{}{},
		pendingTrigger: map[types.NamespacedName][]time.Time{},
	}
	p.health = healthcheck.NewProxyHealth(2*o.SyncPeriod, nil)
	p.health.OnResponse = func(path string, code int) {
		c := p.metrics.HealthzTotal
		if path == "/livez" {
			c = p.metrics.LivezTotal
		}
		c.WithLabelValues(fmt.Sprint(code)).Inc()
	}
	if ct != nil {
		p.ct = &conntrack.Cleaner{CT: ct, OnDeleted: func(n int) { p.metrics.ConntrackDeleted.Add(float64(n)) }}
	}
	p.runner = runner.New(p.sync, o.MinSyncPeriod, o.SyncPeriod)
	return p, nil
}

// Metrics returns the proxy's metrics (its registry is its own).
func (p *Proxy) Metrics() *metrics.Metrics { return p.metrics }

// Ready reports whether the caches have synced and the first sync has
// been programmed.
func (p *Proxy) Ready() bool { return p.ready.Load() }

// Run runs the proxy until ctx ends; every goroutine it starts has
// stopped when it returns. With Options.Cleanup it only removes Portal's
// rules and returns.
func (p *Proxy) Run(ctx context.Context) error {
	if p.opts.Cleanup {
		return CleanupAll(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var factories []informers.SharedInformerFactory
	// Everything stops with ctx: the informers, the HTTP servers and the
	// health check servers, in that order, before Run returns.
	defer func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
		if p.hc != nil {
			p.hc.Close()
		}
		// A mode with a data path of its own (userspace) stops it here;
		// the kernel modes' rules stay, as kube-proxy's do.
		if c, ok := p.proxier.(interface{ Close() error }); ok {
			c.Close()
		}
		wg.Wait()
	}()

	if err := p.serve(ctx, &wg, "--healthz-bind-address", p.opts.HealthzBindAddress, p.health.Handler()); err != nil {
		return err
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", p.metrics.Handler())
	metricsMux.HandleFunc("/proxyMode", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, p.opts.Mode) })
	metricsMux.Handle("/healthz", p.health.Handler())
	metricsMux.HandleFunc("GET /status/services/{namespace}/{name}", p.serveStatus)
	metricsMux.HandleFunc("GET /status/traffic", p.serveTraffic)
	if err := p.serve(ctx, &wg, "--metrics-bind-address", p.opts.MetricsBindAddress, metricsMux); err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactoryWithOptions(p.client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = "!" + labelServiceProxyName + ",!" + labelHeadless
	}))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(p.client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.hostname).String()
	}))
	factories = append(factories, factory, nodeFactory)
	svcInformer := factory.Core().V1().Services().Informer()
	sliceInformer := factory.Discovery().V1().EndpointSlices().Informer()
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	var synced []cache.InformerSynced
	for _, x := range []struct {
		inf       cache.SharedIndexInformer
		transform cache.TransformFunc
		handler   cache.ResourceEventHandler
	}{
		{svcInformer, changetracker.TransformService, p.serviceHandler()},
		{sliceInformer, changetracker.TransformEndpointSlice, p.sliceHandler()},
		{nodeInformer, changetracker.TrimNode, p.nodeHandler()},
	} {
		if err := x.inf.SetTransform(x.transform); err != nil {
			return err
		}
		reg, err := x.inf.AddEventHandler(x.handler)
		if err != nil {
			return err
		}
		// The registration, not the informer: it is synced once our
		// handler has seen the whole initial list. Syncing earlier would
		// program Services whose endpoints are still on their way, and
		// reject their traffic meanwhile.
		synced = append(synced, reg.HasSynced)
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx ended
	}
	klog.InfoS("Proxy caches synced", "node", p.hostname, "mode", p.opts.Mode)
	p.runner.Trigger()
	p.runner.Run(ctx)
	return nil
}

// serve serves h on addr ("" serves nothing) until ctx ends.
func (p *Proxy) serve(ctx context.Context, wg *sync.WaitGroup, flag, addr string, h http.Handler) error {
	if addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Proxy HTTP server stopped", "flag", flag)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		srv.Close()
	}()
	return nil
}

// serveStatus answers what this proxy programmed for one Service (see
// proxy/status), as JSON. It is served with /metrics, on the node only;
// the node agent forwards it to the API server's nodes/NAME/proxy.
func (p *Proxy) serveStatus(w http.ResponseWriter, r *http.Request) {
	nn := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	versions, pending := p.endpoints.Received(nn)
	st := p.book.Service(nn, p.hostname, p.opts.Mode, versions, pending)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}

// changed is called for every event that left a change pending.
func (p *Proxy) changed() {
	p.health.QueuedUpdate()
	p.metrics.LastQueuedTimestamp.SetToCurrentTime()
	p.metrics.ServiceChangesPending.Set(float64(p.services.Pending()))
	p.metrics.EndpointChangesPending.Set(float64(p.endpoints.Pending()))
	p.runner.Trigger()
}

func (p *Proxy) serviceHandler() cache.ResourceEventHandler {
	update := func(old, cur *changetracker.Service) {
		s := cur
		if s == nil {
			s = old
		}
		if s == nil {
			return
		}
		nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		var before, after *snapshot.Service
		if old != nil {
			before = old.Proxied
		}
		if cur != nil {
			after = cur.Proxied
		}
		if p.services.Update(nn, before, after) {
			p.metrics.ServiceChangesTotal.Inc()
			p.changed()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { update(nil, asService(obj)) },
		UpdateFunc: func(old, cur any) { update(asService(old), asService(cur)) },
		DeleteFunc: func(obj any) { update(asService(obj), nil) },
	}
}

func (p *Proxy) sliceHandler() cache.ResourceEventHandler {
	update := func(old, cur *changetracker.Slice) {
		if p.endpoints.Update(old, cur) {
			p.metrics.EndpointChangesTotal.Inc()
			p.changed()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { update(nil, asSlice(obj)) },
		UpdateFunc: func(old, cur any) { update(asSlice(old), asSlice(cur)) },
		DeleteFunc: func(obj any) { update(asSlice(obj), nil) },
	}
}

func (p *Proxy) nodeHandler() cache.ResourceEventHandler {
	set := func(n *v1.Node) {
		p.node.set(n)
		p.changed()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { set(asNode(obj)) },
		UpdateFunc: func(old, cur any) {
			// Agents write their Node's status every minute; a sync for
			// a heartbeat would only hold back the next real change by
			// --min-sync-period.
			if o, c := asNode(old), asNode(cur); o != nil && c != nil && sameNode(o, c) {
				return
			}
			set(asNode(cur))
		},
		DeleteFunc: func(any) { set(nil) },
	}
}

// sameNode reports whether a and b agree on everything the proxy reads
// from a Node (what changetracker.TrimNode keeps).
func sameNode(a, b *v1.Node) bool {
	return a.Name == b.Name &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.Status.Addresses, b.Status.Addresses) &&
		equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints)
}

func asService(obj any) *changetracker.Service {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, _ := obj.(*changetracker.Service)
	return s
}

func asSlice(obj any) *changetracker.Slice {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, _ := obj.(*changetracker.Slice)
	return s
}

func asNode(obj any) *v1.Node {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, _ := obj.(*v1.Node)
	return n
}

// FullSyncPeriod is how often a periodic sync rewrites every rule even
// though nothing changed, repairing whatever else touched them.
var FullSyncPeriod = time.Hour

// sync builds the next snapshot and has the mode program it. It runs on
// the runner's goroutine only.
func (p *Proxy) sync(ctx context.Context, periodic bool) error {
	local, err := p.local()
	if err != nil {
		klog.ErrorS(err, "Could not list local addresses")
	}
	node := buildNode(p.hostname, p.node.get(), local, p.nodePort)
	snap, res := changetracker.Next(p.last, &p.services, p.endpoints, node)
	p.last = snap
	p.metrics.ServiceChangesPending.Set(float64(p.services.Pending()))
	p.metrics.EndpointChangesPending.Set(float64(p.endpoints.Pending()))
	for nn := range res.Changed {
		p.pendingChanged[nn] = struct{}{}
	}
	for nn, tt := range res.TriggerTimes {
		p.pendingTrigger[nn] = append(p.pendingTrigger[nn], tt...)
	}
	// The periodic sync (--sync-period) rewrites everything only once per
	// FullSyncPeriod, as kube-proxy's nftables mode does: in a big
	// cluster a full rewrite is expensive, and changes that arrive
	// meanwhile wait for it.
	full := (periodic && time.Since(p.lastFull) >= FullSyncPeriod) || p.needFull || p.synced == nil || res.NodeChanged
	if !full && len(p.pendingChanged) == 0 {
		p.health.Updated()
		return nil
	}
	req := snapshot.Request{Snapshot: snap, Changed: p.pendingChanged, Full: full}
	start := time.Now()
	err = p.proxier.Sync(ctx, req)
	elapsed := time.Since(start).Seconds()
	p.metrics.SyncDuration.Observe(elapsed)
	if full {
		p.metrics.FullSyncDuration.Observe(elapsed)
	} else {
		p.metrics.PartialSyncDuration.Observe(elapsed)
	}
	if err != nil {
		p.needFull = true
		p.metrics.SyncFailures.WithLabelValues(p.opts.Mode).Inc()
		if p.opts.Mode == ModeNFTables {
			p.metrics.NFTablesSyncFailures.Inc()
		}
		klog.ErrorS(err, "Proxy sync failed; retrying with a full sync", "full", full)
		return err
	}
	p.needFull = false
	now := time.Now()
	if full {
		p.lastFull = now
	}
	p.metrics.LastSyncTimestamp.Set(float64(now.UnixNano()) / 1e9)
	for _, tt := range p.pendingTrigger {
		for _, t := range tt {
			p.metrics.NetworkProgrammingDuration.Observe(now.Sub(t).Seconds())
		}
	}
	if p.ct != nil {
		if err := p.ct.AfterSync(ctx, p.synced, snap, p.pendingChanged, full); err != nil {
			klog.ErrorS(err, "Conntrack cleanup failed")
		}
	}
	p.syncHealthChecks(snap)
	p.health.SetNodeEligible(node.Eligible)
	p.health.Updated()
	klog.V(2).InfoS("Proxy synced", "full", full, "changed", len(p.pendingChanged), "services", len(snap.Services), "seconds", elapsed)
	p.synced = snap
	p.book.Synced(snap, p.pendingChanged, p.pendingTrigger, now)
	p.pendingChanged = map[types.NamespacedName]struct{}{}
	p.pendingTrigger = map[types.NamespacedName][]time.Time{}
	p.ready.Store(true)
	return nil
}

// syncHealthChecks opens a healthCheckNodePort server for every Service
// with one and tells each how many local endpoints it has.
func (p *Proxy) syncHealthChecks(snap *snapshot.Snapshot) {
	want := map[types.NamespacedName]healthcheck.Want{}
	for nn, svc := range snap.Services {
		if svc.HealthCheckNodePort > 0 {
			want[nn] = healthcheck.Want{Port: svc.HealthCheckNodePort, LocalEndpoints: snapshot.LocalReadyCount(snap.Endpoints[nn])}
		}
	}
	// healthCheckNodePorts listen where NodePorts do; when that changes,
	// the servers move.
	var hosts []string
	if !snap.Node.NodePorts.All {
		for _, a := range snap.Node.NodePorts.Addrs {
			hosts = append(hosts, a.String())
		}
	}
	if joined := strings.Join(hosts, ","); p.hc != nil && joined != p.hcHosts {
		p.hc.Close()
		p.hc = nil
	}
	if p.hc == nil {
		if len(want) == 0 {
			return
		}
		p.hc = healthcheck.NewServiceServers(hosts, p.health.Healthy, nil)
		p.hcHosts = strings.Join(hosts, ",")
	}
	if err := p.hc.Sync(want); err != nil {
		klog.ErrorS(err, "Health check servers")
	}
}
