package workload

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// controllerIndex indexes objects by the UID of their controller, and
// orphans under "orphan/<namespace>", so a sync reads its own objects and
// the orphans it may adopt without scanning the namespace.
const controllerIndex = "portal.dev/controller-uid"

func orphanKey(namespace string) string { return "orphan/" + namespace }

func indexByController(obj any) ([]string, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return []string{orphanKey(o.GetNamespace())}, nil
}

// ByController finds the objects of one informer (Pods, ReplicaSets,
// ControllerRevisions) a controller may claim. Build it with
// NewByController before the informer starts.
type ByController[T metav1.Object] struct {
	indexer cache.Indexer
	indexed bool
}

// NewByController adds the by-controller index to inf, or finds it there
// when another controller added it first. When neither works (an informer
// already started), lookups scan the namespace.
func NewByController[T metav1.Object](inf cache.SharedIndexInformer) *ByController[T] {
	b := &ByController[T]{indexer: inf.GetIndexer()}
	if _, ok := b.indexer.GetIndexers()[controllerIndex]; ok {
		b.indexed = true
		return b
	}
	if err := inf.AddIndexers(cache.Indexers{controllerIndex: indexByController}); err != nil {
		utilruntime.HandleError(fmt.Errorf("add index by controller; lookups will scan namespaces: %w", err))
		return b
	}
	b.indexed = true
	return b
}

// Candidates returns the objects in namespace controlled by uid and the
// orphans there: what a Claimer for that owner needs to see.
func (b *ByController[T]) Candidates(namespace string, uid types.UID) ([]T, error) {
	if !b.indexed {
		return b.scan(namespace, uid)
	}
	owned, err := b.indexer.ByIndex(controllerIndex, string(uid))
	if err != nil {
		return nil, err
	}
	orphans, err := b.indexer.ByIndex(controllerIndex, orphanKey(namespace))
	if err != nil {
		return nil, err
	}
	var out []T
	for _, o := range append(owned, orphans...) {
		if t, ok := o.(T); ok && t.GetNamespace() == namespace {
			out = append(out, t)
		}
	}
	return out, nil
}

func (b *ByController[T]) scan(namespace string, uid types.UID) ([]T, error) {
	objs, err := b.indexer.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, o := range objs {
		t, ok := o.(T)
		if !ok {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(t); ref == nil || ref.UID == uid {
			out = append(out, t)
		}
	}
	return out, nil
}
