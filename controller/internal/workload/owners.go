package workload

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Owners reads one kind of controller (ReplicaSets, DaemonSets) from its
// informer cache for the Pod event handlers, which must tell which
// controller an event is about before they count it against expectations
// or queue a sync. Kind, Get, List and Selector are all required.
type Owners[T metav1.Object] struct {
	// Kind is the kind the controller's references name.
	Kind string
	// Get reads a controller from the cache by namespace and name.
	Get func(namespace, name string) (T, error)
	// List reads every controller in a namespace from the cache.
	List func(namespace string) ([]T, error)
	// Selector returns a controller's label selector.
	Selector func(T) *metav1.LabelSelector
}

// namespaceLister is the per-namespace view a generated lister gives
// (ReplicaSetNamespaceLister, say).
type namespaceLister[T any] interface {
	List(selector labels.Selector) ([]T, error)
	Get(name string) (T, error)
}

// NewOwners returns the Owners of kind read through a generated lister's
// per-namespace views (a ReplicaSetLister's ReplicaSets method, say), with
// selector giving an owner's label selector.
func NewOwners[T metav1.Object, L namespaceLister[T]](kind string, inNamespace func(string) L, selector func(T) *metav1.LabelSelector) Owners[T] {
	return Owners[T]{
		Kind:     kind,
		Get:      func(ns, name string) (T, error) { return inNamespace(ns).Get(name) },
		List:     func(ns string) ([]T, error) { return inNamespace(ns).List(labels.Everything()) },
		Selector: selector,
	}
}

// Key returns the "namespace/name" key of the controller ref names, if ref
// is of the kind and the cache holds that controller under ref's UID. A
// controller deleted and re-created under the same name has a new UID, so
// the Pods of the old one are not counted as the new one's.
func (o Owners[T]) Key(namespace string, ref *metav1.OwnerReference) (string, bool) {
	if ref == nil || ref.Kind != o.Kind {
		return "", false
	}
	owner, err := o.Get(namespace, ref.Name)
	if err != nil || owner.GetUID() != ref.UID {
		return "", false
	}
	return namespace + "/" + owner.GetName(), true
}

// Selecting returns the keys of the controllers in namespace whose
// selector matches podLabels: those that may adopt an orphan Pod with
// these labels. A Pod without labels, and a controller whose selector is
// empty or invalid, match nothing.
func (o Owners[T]) Selecting(namespace string, podLabels map[string]string) ([]string, error) {
	if len(podLabels) == 0 {
		return nil, nil
	}
	owners, err := o.List(namespace)
	if err != nil {
		return nil, fmt.Errorf("list %s owners in %s: %w", o.Kind, namespace, err)
	}
	var keys []string
	for _, owner := range owners {
		sel, err := metav1.LabelSelectorAsSelector(o.Selector(owner))
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		keys = append(keys, owner.GetNamespace()+"/"+owner.GetName())
	}
	return keys, nil
}
