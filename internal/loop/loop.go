// Package loop is the skeleton Portal's controllers share, so that each
// controller keeps only its own decisions: informer events become keys on
// a rate-limited work queue, workers sync one key at a time, a failed sync
// is retried with back-off, and Run stops every goroutine it started, and
// removes every event handler it added, before it returns.
//
// A controller builds one Loop in its constructor, registers its event
// handlers through Watch or WatchOrLog (whose handlers only turn events
// into keys), and calls Run from its own Run. The package holds no global
// state: metrics are registered with the Registerer a controller is
// given, for as long as its Loop runs, so a controller rebuilt after a new
// leader election registers its metrics again without colliding with the
// last term's.
package loop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Config says what a Loop does with its keys. Name and Sync are required.
type Config[K comparable] struct {
	// Name names the controller in logs, and its queue unless QueueName
	// is set.
	Name string
	// QueueName names the work queue, which is the name label of the
	// workqueue_* metrics: upstream's queue name keeps dashboards built
	// for kube-controller-manager working.
	QueueName string
	// Sync brings the object a key names to its desired state. An error
	// retries the key with back-off (see RetryAfter for a set delay).
	Sync func(ctx context.Context, key K) error
	// RateLimiter spaces the retries of failed keys; nil means client-go's
	// default controller rate limiter (5 ms doubling to 1000 s per key,
	// 10 qps overall).
	RateLimiter workqueue.TypedRateLimiter[K]
	// MaxRetries drops a key after that many failed syncs in a row, until
	// its next event adds it again; 0 retries for ever.
	MaxRetries int
	// ReportFailures logs a failed sync as an error, for controllers whose
	// failures an operator should see; conflicts, races with other writers
	// that the retry settles, stay at V(2) as every failure does without it.
	ReportFailures bool
	// Clock drives delayed adds and back-off; nil is the real clock.
	Clock clock.WithTicker
	// Observe, when set, is told of every sync's duration and result,
	// for the controller's metrics.
	Observe func(took time.Duration, err error)
	// Start, when set, runs once the caches have synced and before the
	// workers start: rebuilding in-memory state from the caches, queueing
	// what no event will. An error ends Run.
	Start func(ctx context.Context) error
	// Background functions run alongside the workers until ctx ends; Run
	// waits for them to return.
	Background []func(ctx context.Context)
}

// Loop is a work queue with its workers. Build it with New.
type Loop[K comparable] struct {
	cfg   Config[K]
	clock clock.WithTicker
	queue workqueue.TypedRateLimitingInterface[K]

	// synced is set once every watched cache has synced.
	synced atomic.Bool

	mu         sync.Mutex
	handlers   []registration
	waitFor    []cache.InformerSynced
	registerer prometheus.Registerer
	collectors []prometheus.Collector
}

// registration is an event handler added to a shared informer, removed
// when Run returns.
type registration struct {
	informer cache.SharedInformer
	reg      cache.ResourceEventHandlerRegistration
}

// New returns a Loop that is ready to take keys; nothing runs until Run.
func New[K comparable](cfg Config[K]) *Loop[K] {
	if cfg.RateLimiter == nil {
		cfg.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[K]()
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	queueName := cfg.QueueName
	if queueName == "" {
		queueName = cfg.Name
	}
	return &Loop[K]{
		cfg:   cfg,
		clock: clk,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(cfg.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[K]{Name: queueName, Clock: clk}),
	}
}

// Add queues key for a sync.
func (l *Loop[K]) Add(key K) { l.queue.Add(key) }

// AddAfter queues key for a sync once d has passed; d <= 0 queues it now.
func (l *Loop[K]) AddAfter(key K, d time.Duration) { l.queue.AddAfter(key, d) }

// SyncNow syncs key on the calling goroutine and treats a failure as a
// worker would, queueing the key for a retry with back-off. It is for a
// Config.Start that must sync some keys in a set order before the workers
// start, such as the oldest Services first.
func (l *Loop[K]) SyncNow(ctx context.Context, key K) {
	start := l.clock.Now()
	err := l.cfg.Sync(ctx, key)
	if l.cfg.Observe != nil {
		l.cfg.Observe(l.clock.Since(start), err)
	}
	l.handleErr(ctx, key, err)
}

// Len is the number of keys waiting for a worker.
func (l *Loop[K]) Len() int { return l.queue.Len() }

// HasSynced reports whether every watched cache has synced, so events
// from here on are changes, not the first list.
func (l *Loop[K]) HasSynced() bool { return l.synced.Load() }

// Watch adds h to inf. Run waits for the handler to have seen the
// informer's first list, and removes it when it returns. A handler should
// only turn events into keys.
func (l *Loop[K]) Watch(inf cache.SharedInformer, h cache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return fmt.Errorf("%s: add event handler: %w", l.cfg.Name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handlers = append(l.handlers, registration{inf, reg})
	return nil
}

// WatchOrLog is Watch for a constructor with no error to return: a
// handler that cannot be added, because the informer has already stopped,
// is reported through utilruntime.HandleError, and the controller runs
// without those events rather than not at all.
func (l *Loop[K]) WatchOrLog(inf cache.SharedInformer, h cache.ResourceEventHandler) {
	if err := l.Watch(inf, h); err != nil {
		utilruntime.HandleError(err)
	}
}

// WaitFor makes Run wait for more caches to sync than those watched:
// informers a controller reads through listers only.
func (l *Loop[K]) WaitFor(synced ...cache.InformerSynced) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitFor = append(l.waitFor, synced...)
}

// Collect registers collectors with reg (nil: nowhere) while Run runs, and
// unregisters them when it returns. A collector reg already has is logged
// and skipped; the controller runs anyway.
func (l *Loop[K]) Collect(reg prometheus.Registerer, cs ...prometheus.Collector) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.registerer = reg
	l.collectors = append(l.collectors, cs...)
}

// Run waits for the caches, runs Config.Start, then syncs keys with
// workers goroutines (at least one) and the Background functions until
// ctx ends. It returns once every goroutine it started has stopped, its
// event handlers are removed and its metrics unregistered.
func (l *Loop[K]) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx).WithValues("controller", l.cfg.Name)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting controller", "workers", max(workers, 1))
	defer logger.Info("Stopped controller")
	defer l.removeHandlers()
	defer l.register()()
	defer l.queue.ShutDown()

	if !cache.WaitForNamedCacheSync(l.cfg.Name, ctx.Done(), l.cachesToWaitFor()...) {
		return
	}
	l.synced.Store(true)
	if l.cfg.Start != nil {
		if err := l.cfg.Start(ctx); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Controller could not start", "controller", l.cfg.Name)
			return
		}
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for l.processNext(ctx) {
			}
		})
	}
	for _, f := range l.cfg.Background {
		wg.Go(func() { f(ctx) })
	}
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
}

func (l *Loop[K]) cachesToWaitFor() []cache.InformerSynced {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]cache.InformerSynced(nil), l.waitFor...)
	for _, h := range l.handlers {
		out = append(out, h.reg.HasSynced)
	}
	return out
}

func (l *Loop[K]) removeHandlers() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.handlers {
		if err := h.informer.RemoveEventHandler(h.reg); err != nil {
			utilruntime.HandleError(fmt.Errorf("%s: remove event handler: %w", l.cfg.Name, err))
		}
	}
	l.handlers = nil
}

// register registers the collectors and returns the function that
// unregisters those it registered.
func (l *Loop[K]) register() func() {
	l.mu.Lock()
	reg, cs := l.registerer, l.collectors
	l.mu.Unlock()
	if reg == nil {
		return func() {}
	}
	var done []prometheus.Collector
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			klog.ErrorS(err, "Registering controller metric", "controller", l.cfg.Name)
			continue
		}
		done = append(done, c)
	}
	return func() {
		for _, c := range done {
			reg.Unregister(c)
		}
	}
}

// processNext syncs one key; false means the queue has shut down.
func (l *Loop[K]) processNext(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	if ctx.Err() != nil {
		return false
	}
	l.SyncNow(ctx, key)
	return true
}

func (l *Loop[K]) handleErr(ctx context.Context, key K, err error) {
	logger := klog.FromContext(ctx)
	var after *retryAfter
	switch {
	case err == nil:
		l.queue.Forget(key)
	case errors.As(err, &after):
		l.queue.AddAfter(key, after.delay)
	case l.cfg.MaxRetries == 0 || l.queue.NumRequeues(key) < l.cfg.MaxRetries:
		if l.cfg.ReportFailures && !apierrors.IsConflict(err) {
			logger.Error(err, "Sync failed, will retry", "key", key)
		} else {
			logger.V(2).Info("Sync failed, will retry", "key", key, "err", err)
		}
		l.queue.AddRateLimited(key)
	default:
		logger.Info("Sync failed too often, dropping the key until its next change", "key", key, "err", err)
		l.queue.Forget(key)
		utilruntime.HandleErrorWithContext(ctx, err, "Dropped key", "controller", l.cfg.Name, "key", key)
	}
}

// retryAfter is an error that retries its key after a set delay.
type retryAfter struct {
	delay time.Duration
	err   error
}

func (e *retryAfter) Error() string { return e.err.Error() }
func (e *retryAfter) Unwrap() error { return e.err }

// RetryAfter wraps err so that a Sync returning it is tried again after d,
// neither backing off nor counting towards MaxRetries: for a condition
// known to pass soon, such as a cache catching up with the controller's
// own write.
func RetryAfter(d time.Duration, err error) error {
	return &retryAfter{delay: d, err: err}
}
