// Package ingress is Portal's Ingress controller: an HTTP and HTTPS server
// that routes each request by the Table of package ingress/route and
// proxies it to a ready endpoint of the matched Service, with retries on
// refused connections, per-Ingress timeouts, WebSocket and other upgrades,
// h2c and gRPC to endpoints, metrics and an access log. It reads the API
// through the route Watcher; it writes Events on Ingresses (through the
// Watcher) and the status of the Ingresses it serves (their
// loadBalancer addresses, through package ingress/status), nothing else.
package ingress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"portal.dev/portal/ingress/route"
	"portal.dev/portal/ingress/status"
)

// Controller watches the Ingresses of its class and serves them.
type Controller struct {
	opts    Options
	client  kubernetes.Interface
	metrics *Metrics
	ready   atomic.Bool
}

// New returns a controller of the API client talks to; Run starts it.
func New(client kubernetes.Interface, o Options) (*Controller, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Controller{opts: o, client: client, metrics: NewMetrics()}, nil
}

// Metrics returns the controller's metrics.
func (c *Controller) Metrics() *Metrics { return c.metrics }

// Ready reports whether the controller serves the Ingresses it found at
// start.
func (c *Controller) Ready() bool { return c.ready.Load() }

// Run binds the ports first, so that a port in use fails at once with a
// *BindError, then watches the API and serves until ctx ends. Requests
// are accepted only once the first Table is built: a client connecting
// earlier waits in the listen queue rather than getting a 404 for an
// Ingress not read yet.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	var fopts []informers.SharedInformerOption
	if c.opts.WatchNamespace != "" {
		fopts = append(fopts, informers.WithNamespace(c.opts.WatchNamespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, fopts...)
	w := route.NewWatcher(c.client, factory, route.WatcherOptions{
		IngressClass:          c.opts.IngressClass,
		WatchNamespace:        c.opts.WatchNamespace,
		DefaultSSLCertificate: c.opts.DefaultSSLCertificate,
		Recorder:              broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "portal-ingress"}),
	})
	table := func() Routes { return w.Table() }
	h := NewHandler(table, c.opts, c.metrics)
	servers, err := Listen(c.opts, h, table, w.DefaultCertificate)
	if err != nil {
		return err
	}
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	goRun := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	c.serveEndpoints(goRun)
	// Subscribed before the Watcher runs, so no Table goes unnoticed.
	changed := w.Changed()
	// Each term of leadership gets an updater of its own: one runs once.
	publishStatus := func(ctx context.Context) error {
		publisher := status.New(c.client, factory, status.Options{
			Ours:                 w.Ours,
			PublishService:       c.opts.PublishService,
			PublishStatusAddress: c.opts.statusAddresses(),
			NodeName:             c.opts.NodeName,
			Resync:               w.Changed(),
		})
		// Starts any informer the updater asked for that the Watcher did not.
		factory.Start(ctx.Done())
		return publisher.Run(ctx)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	goRun(w.Run)
	for !w.HasSynced() && ctx.Err() == nil {
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
	if ctx.Err() == nil {
		c.ready.Store(true)
		klog.InfoS("Ingress controller serving", "addresses", servers.Addrs(), "ingressClass", c.opts.IngressClass)
	}
	goRun(func(ctx context.Context) error { c.countTables(ctx, w, changed); return nil })
	goRun(servers.Serve)
	goRun(func(ctx context.Context) error { return c.whileLeading(ctx, publishStatus) })
	goRun(h.sweep)
	<-ctx.Done()
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// countTables updates the config metrics whenever the Watcher publishes
// a new Table (changed also fires for endpoint changes, which keep the
// Table).
func (c *Controller) countTables(ctx context.Context, w *route.Watcher, changed <-chan struct{}) {
	var last *route.Table
	for {
		if t := w.Table(); t != last {
			last = t
			if !t.Built.IsZero() {
				c.metrics.Applied(t.Built)
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// serveEndpoints serves /metrics, /status/backends and /healthz (and
// /debug/pprof with --profiling) on --metrics-bind-address and /healthz
// alone on --healthz-bind-address.
func (c *Controller) serveEndpoints(goRun func(func(context.Context) error)) {
	healthz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", c.metrics.Handler())
	metrics.HandleFunc("GET /status/backends", c.metrics.serveBackends)
	metrics.Handle("/healthz", healthz)
	if c.opts.Profiling {
		metrics.HandleFunc("/debug/pprof/", pprof.Index)
		metrics.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		metrics.HandleFunc("/debug/pprof/profile", pprof.Profile)
		metrics.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		metrics.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	health := http.NewServeMux()
	health.Handle("/healthz", healthz)
	for _, e := range []struct {
		flag, addr string
		h          http.Handler
	}{{"--metrics-bind-address", c.opts.MetricsBindAddress, metrics}, {"--healthz-bind-address", c.opts.HealthzBindAddress, health}} {
		if e.addr == "" {
			continue
		}
		goRun(func(ctx context.Context) error { return serveHTTP(ctx, e.flag, e.addr, e.h) })
	}
}

// serveHTTP serves h on addr until ctx ends. A port in use is logged, not
// fatal: the proxy matters more than its metrics.
func serveHTTP(ctx context.Context, flag, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		klog.ErrorS(err, "Cannot serve; change the flag to another address", "flag", flag, "address", addr)
		return nil
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
