package route

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"portal.dev/portal/proxy/runner"
)

// LegacyClassAnnotation is the annotation that named an Ingress's class
// before spec.ingressClassName; it is still honoured.
const LegacyClassAnnotation = "kubernetes.io/ingress.class"

// DefaultIngressClass is the IngressClass served when none is configured.
const DefaultIngressClass = "portal"

const (
	// minRebuildInterval spaces rebuilds while changes keep coming; the
	// first change after a quiet period rebuilds at once.
	minRebuildInterval = 20 * time.Millisecond
	// resyncPeriod rebuilds now and then whatever happens, a safety net
	// that costs one build.
	resyncPeriod = 10 * time.Minute
)

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// IngressClass is the name of the IngressClass served ("portal" when
	// empty).
	IngressClass string
	// WatchNamespace limits the Ingresses served to one namespace ("" for
	// all). The factory given to NewWatcher may be limited the same way.
	WatchNamespace string
	// DefaultSSLCertificate is "namespace/name" of a kubernetes.io/tls
	// Secret served to clients no Ingress has a certificate for ("" for
	// none).
	DefaultSSLCertificate string
	// Recorder receives the Warning Events about Ingresses; nil drops
	// them.
	Recorder record.EventRecorder
}

// Watcher keeps a Table current from informers: it rebuilds the Table
// when an Ingress, IngressClass, or a Service or Secret that one names,
// changes, and updates Backends' endpoints in place when EndpointSlices
// change. Create it with NewWatcher.
type Watcher struct {
	opts      WatcherOptions
	ingresses networkinglisters.IngressLister
	classes   networkinglisters.IngressClassLister
	sources   *listerSources
	synced    []cache.InformerSynced
	runner    *runner.Runner

	// defaultSecret watches the default certificate's Secret alone: it
	// may live outside the watched namespace.
	defaultSecret   cache.SharedIndexInformer
	defaultSecretNN types.NamespacedName

	table       atomic.Pointer[Table]
	defaultCert atomic.Pointer[tls.Certificate]
	ready       atomic.Bool

	// mu serialises builds and endpoint updates, so that an endpoint
	// change is applied either to the Backends a build reads or to those
	// it publishes, never lost between the two.
	mu           sync.Mutex
	last         *Result
	defaultCerts certCache
	defaultErr   string
	reported     map[problemKey]struct{}

	subsMu sync.Mutex
	subs   []chan struct{}
}

type problemKey struct {
	ingress         types.UID
	reason, message string
}

// NewWatcher returns a Watcher that reads Ingresses, IngressClasses,
// Services, EndpointSlices and Secrets through factory, which the caller
// starts (before or after NewWatcher; Run waits for its caches). Events
// go through o.Recorder.
func NewWatcher(client kubernetes.Interface, factory informers.SharedInformerFactory, o WatcherOptions) *Watcher {
	if o.IngressClass == "" {
		o.IngressClass = DefaultIngressClass
	}
	ingInf := factory.Networking().V1().Ingresses()
	classInf := factory.Networking().V1().IngressClasses()
	w := &Watcher{
		opts:      o,
		ingresses: ingInf.Lister(),
		classes:   classInf.Lister(),
		sources:   newListerSources(factory),
	}
	w.runner = runner.New(w.rebuild, minRebuildInterval, resyncPeriod)
	trigger := func(any) { w.runner.Trigger() }
	w.watch(ingInf.Informer(), w.ingressChanged, sameIngress)
	w.watch(classInf.Informer(), trigger, nil)
	w.watch(factory.Core().V1().Services().Informer(), w.serviceChanged, nil)
	w.watch(factory.Core().V1().Secrets().Informer(), w.secretChanged, nil)
	w.watch(factory.Discovery().V1().EndpointSlices().Informer(), w.sliceChanged, nil)
	if ns, name, ok := strings.Cut(o.DefaultSSLCertificate, "/"); ok && ns != "" && name != "" {
		w.defaultSecretNN = types.NamespacedName{Namespace: ns, Name: name}
		w.defaultSecret = coreinformers.NewFilteredSecretInformer(client, ns, 0, cache.Indexers{},
			func(lo *metav1.ListOptions) { lo.FieldSelector = "metadata.name=" + name })
		w.watch(w.defaultSecret, trigger, nil)
	} else if o.DefaultSSLCertificate != "" {
		klog.ErrorS(nil, "Default SSL certificate is not namespace/name; serving none", "defaultSSLCertificate", o.DefaultSSLCertificate)
	}
	return w
}

// watch calls changed with the current object of every add, update
// and delete; not for the periodic resyncs, which change nothing, nor for
// updates that same (when not nil) finds make no difference.
func (w *Watcher) watch(inf cache.SharedIndexInformer, changed func(obj any), same func(old, cur any) bool) {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(metav1.Object)
			c, ok2 := cur.(metav1.Object)
			if ok1 && ok2 && o.GetResourceVersion() != "" && o.GetResourceVersion() == c.GetResourceVersion() ||
				same != nil && same(old, cur) {
				return
			}
			changed(cur)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			changed(obj)
		},
	})
	if err != nil {
		klog.ErrorS(err, "Ingress watcher handler not added")
	}
	w.synced = append(w.synced, inf.HasSynced)
}

// Run builds the first Table once the caches have synced, then keeps it
// current until ctx ends. Every goroutine it starts has stopped when it
// returns.
func (w *Watcher) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if w.defaultSecret != nil {
		wg.Go(func() { w.defaultSecret.Run(ctx.Done()) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return nil // ctx ended first
	}
	if err := w.rebuild(ctx, false); err != nil {
		return fmt.Errorf("build the first Ingress table: %w", err)
	}
	w.runner.Run(ctx)
	return nil
}

// Table returns the current Table; never nil (empty until the first
// build). Safe from any goroutine.
func (w *Watcher) Table() *Table {
	if t := w.table.Load(); t != nil {
		return t
	}
	return &emptyTable
}

var emptyTable Table

// HasSynced reports whether the first Table, from synced caches, is
// served.
func (w *Watcher) HasSynced() bool {
	return w.ready.Load()
}

// DefaultCertificate returns the certificate of the default SSL
// certificate Secret, or nil when none is configured or it cannot be
// used.
func (w *Watcher) DefaultCertificate() *tls.Certificate {
	return w.defaultCert.Load()
}

// Changed returns a channel that receives a value after each new Table
// and each endpoint change (several changes may come as one value). Each
// call makes a new channel for a new consumer: call it once per consumer,
// not once per wait.
func (w *Watcher) Changed() <-chan struct{} {
	ch := make(chan struct{}, 1)
	w.subsMu.Lock()
	w.subs = append(w.subs, ch)
	w.subsMu.Unlock()
	return ch
}

func (w *Watcher) notify() {
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	for _, ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// rebuild builds and publishes a new Table, then reports the problems
// found that were not already reported.
func (w *Watcher) rebuild(ctx context.Context, _ bool) error {
	all, err := w.ingresses.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list ingresses: %w", err)
	}
	ours := all[:0:0]
	for _, ing := range all {
		if w.Ours(ing) {
			ours = append(ours, ing)
		}
	}
	start := time.Now()
	w.mu.Lock()
	res := Build(Input{Ingresses: ours, Sources: w.sources, Previous: w.last, Now: start})
	w.last = res
	w.table.Store(res.Table)
	w.updateDefaultCertificateLocked()
	w.reportLocked(res.Problems)
	w.mu.Unlock()
	w.ready.Store(true)
	klog.V(2).InfoS("Ingress table built", "ingresses", len(ours), "problems", len(res.Problems), "duration", time.Since(start))
	w.notify()
	return nil
}

// reportLocked records a Warning Event for each problem that the
// previous build did not also find: a rebuild for an unrelated change
// must not repeat them.
func (w *Watcher) reportLocked(problems []Problem) {
	next := make(map[problemKey]struct{}, len(problems))
	for _, p := range problems {
		k := problemKey{ingress: p.Ingress.UID, reason: p.Reason, message: p.Message}
		if _, dup := next[k]; dup {
			continue
		}
		next[k] = struct{}{}
		if _, old := w.reported[k]; old {
			continue
		}
		klog.V(2).InfoS("Ingress problem", "ingress", klog.KObj(p.Ingress), "reason", p.Reason, "message", p.Message)
		if w.opts.Recorder != nil {
			w.opts.Recorder.Event(p.Ingress, corev1.EventTypeWarning, p.Reason, p.Message)
		}
	}
	w.reported = next
}

// updateDefaultCertificateLocked parses the default certificate's Secret
// (again only when it changed) and logs when it cannot be used.
func (w *Watcher) updateDefaultCertificateLocked() {
	if w.defaultSecret == nil {
		return
	}
	var sec *corev1.Secret
	if obj, ok, _ := w.defaultSecret.GetStore().GetByKey(w.defaultSecretNN.String()); ok {
		sec, _ = obj.(*corev1.Secret)
	}
	next := certCache{}
	cert, err := w.defaultCerts.get(w.defaultSecretNN, sec, next)
	w.defaultCerts = next
	w.defaultCert.Store(cert)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != w.defaultErr && msg != "" {
		klog.ErrorS(nil, "Default SSL certificate cannot be used", "secret", w.defaultSecretNN, "problem", msg)
	}
	w.defaultErr = msg
}

func (w *Watcher) ingressChanged(obj any) {
	if ing, ok := obj.(*networkingv1.Ingress); ok && (w.Ours(ing) || w.served(ing)) {
		w.runner.Trigger()
	}
}

// sameIngress reports whether an Ingress update leaves what routing reads
// unchanged: the controller's own status updates, for one, must not
// rebuild the Table.
func sameIngress(old, cur any) bool {
	o, ok1 := old.(*networkingv1.Ingress)
	c, ok2 := cur.(*networkingv1.Ingress)
	return ok1 && ok2 && equality.Semantic.DeepEqual(o.Spec, c.Spec) &&
		maps.Equal(o.Annotations, c.Annotations) && o.DeletionTimestamp.Equal(c.DeletionTimestamp)
}

// served reports whether the current Table was built with ing (it may
// no longer be ours, and must then leave the Table).
func (w *Watcher) served(ing *networkingv1.Ingress) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last == nil || w.last.ingresses[ing.UID]
}

func (w *Watcher) serviceChanged(obj any) {
	if svc, ok := obj.(*corev1.Service); ok && w.uses(func(r *Result) bool {
		return r.UsesService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	}) {
		w.runner.Trigger()
	}
}

func (w *Watcher) secretChanged(obj any) {
	if sec, ok := obj.(*corev1.Secret); ok && w.uses(func(r *Result) bool {
		return r.UsesSecret(types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name})
	}) {
		w.runner.Trigger()
	}
}

// uses asks the current build whether it depends on an object; before
// the first build everything counts.
func (w *Watcher) uses(f func(*Result) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last == nil || f(w.last)
}

// sliceChanged updates the endpoints of the Backends of the slice's
// Service in place: no rebuild.
func (w *Watcher) sliceChanged(obj any) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	nn := types.NamespacedName{Namespace: es.Namespace, Name: es.Labels[discoveryv1.LabelServiceName]}
	w.mu.Lock()
	changed := w.last != nil && w.last.UsesService(nn) && w.last.UpdateEndpoints(nn, w.sources.EndpointSlices(nn))
	w.mu.Unlock()
	if changed {
		w.notify()
	}
}
