package namespace

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// collection is what a typed client offers for one namespaced resource.
type collection interface {
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

type resource struct {
	name  string
	group string
	get   func(c kubernetes.Interface, ns string) collection
	list  func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error)
}

// deleteAll deletes every object of the resource in ns and adds what
// remains (terminating pods, objects held by finalizers) to left.
func (r resource) deleteAll(ctx context.Context, c kubernetes.Interface, ns string, left *remaining) error {
	bg := metav1.DeletePropagationBackground
	if err := r.get(c, ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		return err
	}
	list, err := r.list(ctx, c, ns)
	if err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		obj, err := meta.Accessor(item)
		if err != nil {
			return err
		}
		left.add(r.name+"."+r.group, obj.GetFinalizers())
	}
	return nil
}

// namespacedResources are the namespaced kinds Portal serves. Workloads
// go first, so that no controller replaces the pods being deleted, then
// pods, so that their endpoints go with them.
var namespacedResources = []resource{
	{"deployments", "apps", func(c kubernetes.Interface, ns string) collection { return c.AppsV1().Deployments(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		}},
	{"statefulsets", "apps", func(c kubernetes.Interface, ns string) collection { return c.AppsV1().StatefulSets(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		}},
	{"daemonsets", "apps", func(c kubernetes.Interface, ns string) collection { return c.AppsV1().DaemonSets(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		}},
	{"replicasets", "apps", func(c kubernetes.Interface, ns string) collection { return c.AppsV1().ReplicaSets(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		}},
	{"controllerrevisions", "apps", func(c kubernetes.Interface, ns string) collection { return c.AppsV1().ControllerRevisions(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
		}},
	{"pods", "", func(c kubernetes.Interface, ns string) collection { return c.CoreV1().Pods(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		}},
	{"services", "", func(c kubernetes.Interface, ns string) collection { return serviceCollection{c, ns} },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		}},
	{"endpoints", "", func(c kubernetes.Interface, ns string) collection { return c.CoreV1().Endpoints(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoreV1().Endpoints(ns).List(ctx, metav1.ListOptions{})
		}},
	{"endpointslices", "discovery.k8s.io", func(c kubernetes.Interface, ns string) collection { return c.DiscoveryV1().EndpointSlices(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		}},
	{"secrets", "", func(c kubernetes.Interface, ns string) collection { return c.CoreV1().Secrets(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		}},
	{"configmaps", "", func(c kubernetes.Interface, ns string) collection { return c.CoreV1().ConfigMaps(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		}},
	{"serviceaccounts", "", func(c kubernetes.Interface, ns string) collection { return c.CoreV1().ServiceAccounts(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		}},
	{"leases", "coordination.k8s.io", func(c kubernetes.Interface, ns string) collection { return c.CoordinationV1().Leases(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		}},
	{"ingresses", "networking.k8s.io", func(c kubernetes.Interface, ns string) collection { return c.NetworkingV1().Ingresses(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
		}},
	{"events", "", func(c kubernetes.Interface, ns string) collection { return c.CoreV1().Events(ns) },
		func(ctx context.Context, c kubernetes.Interface, ns string) (runtime.Object, error) {
			return c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		}},
}

// serviceCollection deletes services one by one: like upstream, the
// services resource has no delete-collection.
type serviceCollection struct {
	c  kubernetes.Interface
	ns string
}

func (s serviceCollection) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	list, err := s.c.CoreV1().Services(s.ns).List(ctx, listOpts)
	if err != nil {
		return err
	}
	for _, svc := range list.Items {
		err := s.c.CoreV1().Services(s.ns).Delete(ctx, svc.Name, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
