package changetracker

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/proxy/snapshot"
)

// The Transform functions are informer transforms: they replace each
// Service and EndpointSlice, before it reaches the informer's cache, by
// the proxy's own slim form of it, so 10,000 Services and 100,000
// endpoints are held once and small. The cached values implement
// metav1.Object (for the cache's keys) and nothing else; handlers get
// them, not API objects. Both transforms are idempotent, as client-go
// asks.

// Service is a Service as the proxy caches it.
type Service struct {
	// ObjectMeta has only the namespace, name, UID and resourceVersion.
	metav1.ObjectMeta
	// Proxied is ServiceFromAPI's result: nil when there is nothing to
	// proxy (ExternalName, headless).
	Proxied *snapshot.Service
}

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion}
}

// TransformService turns a *v1.Service into a *Service.
func TransformService(obj any) (any, error) {
	if svc, ok := obj.(*v1.Service); ok {
		return &Service{ObjectMeta: slimMeta(&svc.ObjectMeta), Proxied: ServiceFromAPI(svc)}, nil
	}
	return obj, nil
}

// TransformEndpointSlice turns a *discovery.EndpointSlice into a *Slice.
func TransformEndpointSlice(obj any) (any, error) {
	if s, ok := obj.(*discovery.EndpointSlice); ok {
		return SliceFromAPI(s), nil
	}
	return obj, nil
}

// TrimNode keeps the labels, addresses, taints and deletion timestamp of
// a Node (there is one, this node's).
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Annotations = nil
	n.Status = v1.NodeStatus{Addresses: n.Status.Addresses}
	n.Spec = v1.NodeSpec{Taints: n.Spec.Taints}
	return n, nil
}
