package gc

import (
	"context"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// monitor feeds the graph with the objects of one resource. It is the
// store of a reflector over the resource's metadata: what the reflector
// lists and watches goes straight into the graph, which keeps its own
// slim node for each object, instead of into an informer's cache that
// would hold a second copy of every object's metadata (upstream's
// collector keeps both; the graph is all this one reads). Deletes and
// relists arrive as they do in an informer's store, so a relist removes
// the objects it no longer lists.
type monitor struct {
	c        *Collector
	resource *schema.GroupVersionResource
	// synced is set once the first list is in the graph.
	synced atomic.Bool
}

var _ cache.ReflectorStore = (*monitor)(nil)

// newReflector returns a reflector that lists and watches the metadata of
// m's resource in every namespace into m.
func (m *monitor) newReflector() *cache.Reflector {
	client := m.c.metadata.Resource(*m.resource).Namespace(metav1.NamespaceAll)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, opts)
		},
	}, m.c.metadata)
	return cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, m,
		cache.ReflectorOptions{Name: "garbage collector " + m.resource.String()})
}

// Add records an object the watch reports added.
func (m *monitor) Add(obj any) error {
	m.c.observe(m.resource, obj)
	return nil
}

// Update records an object the watch reports changed.
func (m *monitor) Update(obj any) error {
	m.c.observe(m.resource, obj)
	return nil
}

// Delete forgets an object the watch reports deleted.
func (m *monitor) Delete(obj any) error {
	m.c.forget(obj)
	return nil
}

// Replace records the objects of a (re)list and forgets the resource's
// objects it does not hold: they were deleted while no watch ran, or were
// replaced by an object of the same name and another UID.
func (m *monitor) Replace(list []any, _ string) error {
	keep := make(map[types.UID]struct{}, len(list))
	for _, obj := range list {
		if o, ok := obj.(*metav1.PartialObjectMetadata); ok {
			keep[o.UID] = struct{}{}
		}
		m.c.observe(m.resource, obj)
	}
	m.c.enqueue(m.c.graph.removeOthers(m.resource, keep))
	m.synced.Store(true)
	return nil
}

// Resync does nothing: the graph needs no periodic replay.
func (m *monitor) Resync() error { return nil }
