package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// caches are the server's informers over the kinds the map colours from.
// They start on the first status request, not with the server: a server
// nobody opens the UI on should not hold every pod twice.
type caches struct {
	newClient func() (kubernetes.Interface, error)
	stop      <-chan struct{}

	once    sync.Once
	err     error
	synced  chan struct{}
	svc     cache.SharedIndexInformer
	pods    cache.SharedIndexInformer
	slices  cache.SharedIndexInformer
	nodes   cache.SharedIndexInformer
	ingress cache.SharedIndexInformer
	// marks are the versions /ui/api/list answers with, per kind it serves.
	marks map[string]*rvMark
}

func newCaches(newClient func() (kubernetes.Interface, error), stop <-chan struct{}) *caches {
	return &caches{newClient: newClient, stop: stop, synced: make(chan struct{})}
}

// start builds and runs the informers once.
func (c *caches) start() {
	c.once.Do(func() {
		client, err := c.newClient()
		if err != nil {
			c.err = fmt.Errorf("UI caches: %w", err)
			close(c.synced)
			return
		}
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slim))
		c.svc = f.Core().V1().Services().Informer()
		c.pods = f.Core().V1().Pods().Informer()
		c.slices = f.Discovery().V1().EndpointSlices().Informer()
		c.nodes = f.Core().V1().Nodes().Informer()
		c.ingress = f.Networking().V1().Ingresses().Informer()
		c.marks = map[string]*rvMark{}
		listed := map[string]cache.SharedIndexInformer{"services": c.svc, "pods": c.pods, "endpointslices": c.slices}
		for kind, inf := range listed {
			c.marks[kind] = &rvMark{}
			c.marks[kind].track(inf)
		}
		f.Start(c.stop)
		go func() {
			f.WaitForCacheSync(c.stop)
			// The initial lists are stored now, and their versions
			// hold where no object has changed since. (A watch event
			// that reached the reflector in this very moment may still
			// be queued: the one window left.)
			for kind, inf := range listed {
				c.marks[kind].raise(inf.LastSyncResourceVersion())
			}
			close(c.synced)
		}()
	})
}

// wait starts the caches if need be and waits until they hold the API's
// state, or ctx ends.
func (c *caches) wait(ctx context.Context) error {
	c.start()
	select {
	case <-c.synced:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("UI caches not synced yet: %w", ctx.Err())
	case <-time.After(30 * time.Second):
		return fmt.Errorf("UI caches not synced after 30s")
	}
}

// slim drops managed fields, which the diagnosis never reads and which
// are often the larger part of an object.
func slim(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// inNamespace lists the objects of one informer in ns.
func inNamespace[T any](inf cache.SharedIndexInformer, ns string) []T {
	items, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	out := make([]T, 0, len(items))
	for _, it := range items {
		if v, ok := it.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// all lists every object of one informer.
func all[T any](inf cache.SharedIndexInformer) []T {
	items := inf.GetStore().List()
	out := make([]T, 0, len(items))
	for _, it := range items {
		if v, ok := it.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// namespaceObjects are the cached objects of one namespace.
type namespaceObjects struct {
	services  []*corev1.Service
	pods      []*corev1.Pod
	slices    []*discoveryv1.EndpointSlice
	nodes     []*corev1.Node
	ingresses []*networkingv1.Ingress
}

func (c *caches) namespace(ns string) namespaceObjects {
	return namespaceObjects{
		services:  inNamespace[*corev1.Service](c.svc, ns),
		pods:      inNamespace[*corev1.Pod](c.pods, ns),
		slices:    inNamespace[*discoveryv1.EndpointSlice](c.slices, ns),
		nodes:     all[*corev1.Node](c.nodes),
		ingresses: inNamespace[*networkingv1.Ingress](c.ingress, ns),
	}
}
