package metricsapi

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	corelisters "k8s.io/client-go/listers/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// NodeREST serves nodes.metrics.k8s.io: get and list, cluster-scoped.
type NodeREST struct {
	rest.TableConvertor
	store *Store
	nodes corelisters.NodeLister
}

// PodREST serves pods.metrics.k8s.io: get and list, namespaced.
type PodREST struct {
	rest.TableConvertor
	store *Store
	pods  corelisters.PodLister
}

var (
	_ rest.Getter               = &NodeREST{}
	_ rest.Lister               = &NodeREST{}
	_ rest.Scoper               = &NodeREST{}
	_ rest.SingularNameProvider = &NodeREST{}
	_ rest.Getter               = &PodREST{}
	_ rest.Lister               = &PodREST{}
	_ rest.Scoper               = &PodREST{}
	_ rest.SingularNameProvider = &PodREST{}
	_ rest.KindProvider         = &NodeREST{}
	_ rest.KindProvider         = &PodREST{}
)

// NewNodeREST returns nodes.metrics.k8s.io served from store; the lister
// gives the nodes' labels to select on.
func NewNodeREST(store *Store, nodes corelisters.NodeLister) *NodeREST {
	return &NodeREST{TableConvertor: rest.NewDefaultTableConvertor(metricsv1beta1.Resource("nodes")), store: store, nodes: nodes}
}

// NewPodREST returns pods.metrics.k8s.io served from store; the lister
// gives the pods' labels to select on.
func NewPodREST(store *Store, pods corelisters.PodLister) *PodREST {
	return &PodREST{TableConvertor: rest.NewDefaultTableConvertor(metricsv1beta1.Resource("pods")), store: store, pods: pods}
}

// New returns an empty NodeMetrics.
func (r *NodeREST) New() runtime.Object { return &metricsv1beta1.NodeMetrics{} }

// NewList returns an empty NodeMetricsList.
func (r *NodeREST) NewList() runtime.Object { return &metricsv1beta1.NodeMetricsList{} }

// Destroy is a no-op: the store is not the REST's to close.
func (r *NodeREST) Destroy() {}

// Kind is NodeMetrics.
func (r *NodeREST) Kind() string { return "NodeMetrics" }

// NamespaceScoped is false: nodes have no namespace.
func (r *NodeREST) NamespaceScoped() bool { return false }

// GetSingularName is nodemetrics' singular, as metrics-server names it.
func (r *NodeREST) GetSingularName() string { return "node" }

// Get returns one node's metrics; not found until two samples are in.
func (r *NodeREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	m, ok := r.store.Node(name)
	if !ok {
		return nil, apierrors.NewNotFound(metricsv1beta1.Resource("nodes"), name)
	}
	if n, err := r.nodes.Get(name); err == nil {
		m.Labels = n.Labels
	}
	return m, nil
}

// List returns the metrics of the nodes that match the selectors.
func (r *NodeREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	sel, fsel := selectors(opts)
	nodes, err := r.nodes.List(sel)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := &metricsv1beta1.NodeMetricsList{}
	for _, n := range nodes {
		if !fsel.Matches(fields.Set{"metadata.name": n.Name}) {
			continue
		}
		if m, ok := r.store.Node(n.Name); ok {
			m.Labels = n.Labels
			out.Items = append(out.Items, *m)
		}
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].Name < out.Items[j].Name })
	return out, nil
}

// New returns an empty PodMetrics.
func (r *PodREST) New() runtime.Object { return &metricsv1beta1.PodMetrics{} }

// NewList returns an empty PodMetricsList.
func (r *PodREST) NewList() runtime.Object { return &metricsv1beta1.PodMetricsList{} }

// Destroy is a no-op: the store is not the REST's to close.
func (r *PodREST) Destroy() {}

// Kind is PodMetrics.
func (r *PodREST) Kind() string { return "PodMetrics" }

// NamespaceScoped is true: pods live in namespaces.
func (r *PodREST) NamespaceScoped() bool { return true }

// GetSingularName is podmetrics' singular, as metrics-server names it.
func (r *PodREST) GetSingularName() string { return "pod" }

// Get returns one pod's metrics; not found until two samples are in, or
// when the pod is gone.
func (r *PodREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	if p, err := r.pods.Pods(ns).Get(name); err == nil {
		for _, m := range r.store.Pods(ns) {
			if m.Metrics.Name == name && m.Node == p.Spec.NodeName {
				m.Metrics.Labels = p.Labels
				return &m.Metrics, nil
			}
		}
	}
	return nil, apierrors.NewNotFound(metricsv1beta1.Resource("pods"), name)
}

// List returns the metrics of the request's namespace's pods (every
// namespace's without one) that match the selectors.
func (r *PodREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	sel, fsel := selectors(opts)
	pods, err := r.pods.Pods(ns).List(sel)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	byKey := map[[2]string]*corev1.Pod{}
	for _, p := range pods {
		byKey[[2]string{p.Namespace, p.Name}] = p
	}
	out := &metricsv1beta1.PodMetricsList{}
	for _, nm := range r.store.Pods(ns) {
		m := nm.Metrics
		p := byKey[[2]string{m.Namespace, m.Name}]
		// Only the figures from the node the pod is bound to are its:
		// another node's are of an earlier pod of the same name.
		if p == nil || p.Spec.NodeName != nm.Node || !fsel.Matches(fields.Set{"metadata.name": m.Name, "metadata.namespace": m.Namespace}) {
			continue
		}
		m.Labels = p.Labels
		out.Items = append(out.Items, m)
	}
	sort.Slice(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out, nil
}

// selectors are the list's label and field selectors, everything when
// unset.
func selectors(opts *metainternalversion.ListOptions) (labels.Selector, fields.Selector) {
	sel, fsel := labels.Everything(), fields.Everything()
	if opts != nil && opts.LabelSelector != nil {
		sel = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		fsel = opts.FieldSelector
	}
	return sel, fsel
}
