package route

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// sliceIndex indexes EndpointSlices by "namespace/service", so that an
// endpoint change finds the slices of its Service without a scan.
const sliceIndex = "portal.dev/ingress-service"

// listerSources are Sources read from informer caches.
type listerSources struct {
	services corelisters.ServiceLister
	secrets  corelisters.SecretLister
	slices   discoverylisters.EndpointSliceLister
	// byService is the slice informer's indexer when sliceIndex could be
	// added (not after the informer started); nil means list and filter.
	byService cache.Indexer
}

func newListerSources(factory informers.SharedInformerFactory) *listerSources {
	secretInf := factory.Core().V1().Secrets().Informer()
	if err := secretInf.SetTransform(slimSecret); err != nil {
		utilruntime.HandleError(fmt.Errorf("set Secret transform; caching Secrets whole: %w", err))
	}
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	s := &listerSources{
		services: factory.Core().V1().Services().Lister(),
		secrets:  factory.Core().V1().Secrets().Lister(),
		slices:   discoverylisters.NewEndpointSliceLister(sliceInf.GetIndexer()),
	}
	if _, ok := sliceInf.GetIndexer().GetIndexers()[sliceIndex]; ok {
		s.byService = sliceInf.GetIndexer()
		return s
	}
	err := sliceInf.AddIndexers(cache.Indexers{sliceIndex: func(obj any) ([]string, error) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
			return nil, nil
		}
		return []string{es.Namespace + "/" + es.Labels[discoveryv1.LabelServiceName]}, nil
	}})
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("add EndpointSlice index by service; lookups will scan the namespace: %w", err))
		return s
	}
	s.byService = sliceInf.GetIndexer()
	return s
}

// slimSecret drops what routing never reads from a cached Secret: the
// data of Secrets that are not kubernetes.io/tls (the controller watches
// every Secret, and most are not certificates), and managed fields.
func slimSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	if s.Type != corev1.SecretTypeTLS {
		s.Data, s.StringData = nil, nil
	}
	return s, nil
}

func (s *listerSources) Service(nn types.NamespacedName) *corev1.Service {
	svc, err := s.services.Services(nn.Namespace).Get(nn.Name)
	if err != nil {
		return nil
	}
	return svc
}

func (s *listerSources) Secret(nn types.NamespacedName) *corev1.Secret {
	sec, err := s.secrets.Secrets(nn.Namespace).Get(nn.Name)
	if err != nil {
		return nil
	}
	return sec
}

func (s *listerSources) EndpointSlices(nn types.NamespacedName) []*discoveryv1.EndpointSlice {
	if s.byService != nil {
		objs, err := s.byService.ByIndex(sliceIndex, nn.Namespace+"/"+nn.Name)
		if err == nil {
			out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
			for _, o := range objs {
				if es, ok := o.(*discoveryv1.EndpointSlice); ok {
					out = append(out, es)
				}
			}
			return out
		}
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: nn.Name})
	out, _ := s.slices.EndpointSlices(nn.Namespace).List(sel)
	return out
}
