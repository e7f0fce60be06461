package manager

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// newInformers returns the informer factory every controller of one term
// shares. Its caches hold objects without managedFields.
func newInformers(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trimManagedFields))
}

// trimManagedFields drops managedFields from what the shared informers
// cache, as kube-controller-manager does: controllers do not read them, and
// they are a large part of every cached Pod, kept in memory and scanned by
// every garbage collection. Endpoints keep theirs: the Endpoints
// controller recognises the objects it wrote by their field manager.
func trimManagedFields(obj any) (any, error) {
	if _, ok := obj.(*corev1.Endpoints); ok {
		return obj, nil
	}
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
