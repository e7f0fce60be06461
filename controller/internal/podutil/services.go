package podutil

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// selectorIndex indexes the Services that have a selector by namespace.
// Selector-less Services, whose endpoints someone else writes, are left
// out: a namespace with hundreds of them would otherwise be walked, and
// listed into a fresh slice, for every Pod event of every endpoint
// controller.
const selectorIndex = "portal.dev/service-with-selector"

// Selecting finds the Services whose selector matches a Pod. Build it
// with NewSelecting.
type Selecting struct {
	indexer  cache.Indexer // nil: list the namespace's Services
	services corelisters.ServiceLister
}

// NewSelecting adds the Services-with-a-selector index to inf (a Service
// informer), or finds it there when another controller added it first.
// When neither works (an informer that has already started), lookups list
// every Service of the namespace.
func NewSelecting(inf cache.SharedIndexInformer) *Selecting {
	s := &Selecting{services: corelisters.NewServiceLister(inf.GetIndexer())}
	if _, ok := inf.GetIndexer().GetIndexers()[selectorIndex]; ok {
		s.indexer = inf.GetIndexer()
		return s
	}
	err := inf.AddIndexers(cache.Indexers{selectorIndex: func(obj any) ([]string, error) {
		if svc, ok := obj.(*corev1.Service); ok && svc.Spec.Selector != nil {
			return []string{svc.Namespace}, nil
		}
		return nil, nil
	}})
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("add Service index by selector; Pod events will list every Service: %w", err))
		return s
	}
	s.indexer = inf.GetIndexer()
	return s
}

// Keys returns the namespace/name keys, sorted, of the Services in ns
// whose selector matches podLabels. A nil selector matches nothing; an
// empty one matches every Pod, as on upstream.
func (s *Selecting) Keys(ns string, podLabels map[string]string) ([]string, error) {
	var keys []string
	add := func(svc *corev1.Service) {
		if svc.Spec.Selector != nil && labels.ValidatedSetSelector(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
			keys = append(keys, svc.Namespace+"/"+svc.Name)
		}
	}
	if s.indexer == nil {
		svcs, err := s.services.Services(ns).List(labels.Everything())
		if err != nil {
			return nil, err
		}
		for _, svc := range svcs {
			add(svc)
		}
	} else {
		objs, err := s.indexer.ByIndex(selectorIndex, ns)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if svc, ok := o.(*corev1.Service); ok {
				add(svc)
			}
		}
	}
	slices.Sort(keys)
	return keys, nil
}
