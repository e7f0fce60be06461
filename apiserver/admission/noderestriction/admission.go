// Package noderestriction is the API server's NodeRestriction admission
// plugin, as upstream's of the same name: it limits what a node's agent
// (system:node:NAME in group system:nodes) may write to what concerns its
// own node. The Node authorizer lets a node write Nodes, Leases, pods and
// their status at all; this plugin checks which ones, since the
// authorizer cannot see a request's body or the object it replaces.
//
// A node may create and update only its own Node object, and neither
// change its taints nor set labels under node-restriction.kubernetes.io/
// or Kubernetes label namespaces that a kubelet does not own; only its own
// Lease in kube-node-lease; the status of, and deletion of, pods bound to
// it; and tokens only for pods bound to it. Portal has no mirror pods, so a
// node may create no pod. Requests of every other user pass untouched.
package noderestriction

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"

	"portal.dev/portal/apiserver/auth"
	"portal.dev/portal/internal/nodelabels"
)

// PluginName is the plugin's name, upstream's.
const PluginName = "NodeRestriction"

// Plugin checks the writes of node users. Make one with New; it needs the
// informer factory (SetExternalKubeInformerFactory) before use.
type Plugin struct {
	*admission.Handler
	pods corelisters.PodLister
}

var _ admission.ValidationInterface = (*Plugin)(nil)

// New returns a plugin that checks creates, updates and deletes.
func New() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete)}
}

// SetExternalKubeInformerFactory makes the plugin look pods up through f,
// for deletes and token requests, which carry no pod of their own.
func (p *Plugin) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	inf := f.Core().V1().Pods()
	p.pods = inf.Lister()
	p.SetReadyFunc(inf.Informer().HasSynced)
}

// ValidateInitialization fails when the plugin has no informer factory.
func (p *Plugin) ValidateInitialization() error {
	if p.pods == nil {
		return fmt.Errorf("%s: no pod lister", PluginName)
	}
	return nil
}

var (
	podResource            = corev1.Resource("pods")
	nodeResource           = corev1.Resource("nodes")
	serviceAccountResource = corev1.Resource("serviceaccounts")
	leaseResource          = coordinationv1.Resource("leases")
)

// Validate refuses a node user's write that concerns another node.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	node, ok := auth.NodeName(a.GetUserInfo())
	if !ok {
		return nil
	}
	switch a.GetResource().GroupResource() {
	case podResource:
		switch a.GetSubresource() {
		case "":
			return p.admitPod(node, a)
		case "status":
			return admitPodStatus(node, a)
		}
	case nodeResource:
		return admitNode(node, a)
	case leaseResource:
		return admitLease(node, a)
	case serviceAccountResource:
		if a.GetSubresource() == "token" && a.GetOperation() == admission.Create {
			return p.admitToken(node, a)
		}
	}
	return nil
}

func forbidden(a admission.Attributes, format string, args ...any) error {
	return admission.NewForbidden(a, fmt.Errorf(format, args...))
}

// admitPod refuses pod creates (a kubelet creates only mirror pods, which
// Portal does not have) and deletes of pods bound to another node.
func (p *Plugin) admitPod(node string, a admission.Attributes) error {
	switch a.GetOperation() {
	case admission.Create:
		return forbidden(a, "node %q can not create pods: Portal has no mirror pods", node)
	case admission.Delete:
		pod, ok := a.GetOldObject().(*corev1.Pod)
		if !ok {
			var err error
			if pod, err = p.pod(a, a.GetNamespace(), a.GetName()); err != nil {
				return err
			}
		}
		if pod.Spec.NodeName != node {
			return forbidden(a, "node %q can only delete pods with spec.nodeName set to itself", node)
		}
	}
	return nil
}

// pod looks a pod up in the informer's cache: NotFound as such, any other
// failure as a refusal, as upstream answers.
func (p *Plugin) pod(a admission.Attributes, namespace, name string) (*corev1.Pod, error) {
	if !p.WaitForReady() {
		return nil, forbidden(a, "not yet ready to handle request")
	}
	pod, err := p.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		return nil, admission.NewForbidden(a, err)
	}
	return pod, nil
}

// admitPodStatus lets a node write the status of pods bound to it, and
// not their labels through it.
func admitPodStatus(node string, a admission.Attributes) error {
	if a.GetOperation() != admission.Update {
		return forbidden(a, "unexpected operation %q", a.GetOperation())
	}
	old, ok := a.GetOldObject().(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", a.GetOldObject())
	}
	if old.Spec.NodeName != node {
		return forbidden(a, "node %q can only update pod status for pods with spec.nodeName set to itself", node)
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return forbidden(a, "unexpected type %T", a.GetObject())
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return forbidden(a, "node %q cannot update labels through pod status", node)
	}
	return nil
}

// admitNode lets a node write only its own Node, without changing its
// taints or the labels a node must not set on itself (either would let a
// node steer workloads meant for other nodes onto itself), its owner
// references or its config source.
func admitNode(node string, a admission.Attributes) error {
	if a.GetName() != node {
		return forbidden(a, "node %q is not allowed to modify node %q", node, a.GetName())
	}
	switch a.GetOperation() {
	case admission.Create:
		n, ok := a.GetObject().(*corev1.Node)
		if !ok {
			return forbidden(a, "unexpected type %T", a.GetObject())
		}
		// The Node authorizer scopes what a node may read by its Node's
		// spec, so a config source it chose would widen its own view.
		if n.Spec.ConfigSource != nil {
			return forbidden(a, "node %q is not allowed to create pods with a non-nil configSource", node)
		}
		if bad := nodelabels.Forbidden(nodelabels.Modified(n.Labels, nil)); len(bad) > 0 {
			return forbidden(a, "node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
	case admission.Update:
		n, ok := a.GetObject().(*corev1.Node)
		old, ok2 := a.GetOldObject().(*corev1.Node)
		if !ok || !ok2 {
			return forbidden(a, "unexpected type %T", a.GetObject())
		}
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return forbidden(a, "node %q is not allowed to update configSource to a new non-nil configSource", node)
		}
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return forbidden(a, "node %q is not allowed to modify taints", node)
		}
		// An owner that does not exist would have the garbage collector
		// delete the Node, as upstream's NodeRestriction guards against.
		if !apiequality.Semantic.DeepEqual(n.OwnerReferences, old.OwnerReferences) {
			return forbidden(a, "node %q is not allowed to modify ownerReferences", node)
		}
		if bad := nodelabels.Forbidden(nodelabels.Modified(n.Labels, old.Labels)); len(bad) > 0 {
			return forbidden(a, "node %q is not allowed to modify labels: %s", node, strings.Join(bad, ", "))
		}
	case admission.Delete:
		// Upstream's kubelet may delete its own Node; Portal's agent
		// never does, and the Node authorizer's rules do not allow it.
	}
	return nil
}

// admitLease lets a node write only its own Lease in kube-node-lease. On
// create the request names no object, so the name comes from the body.
func admitLease(node string, a admission.Attributes) error {
	if a.GetNamespace() != corev1.NamespaceNodeLease {
		return forbidden(a, "can only access leases in the %q system namespace", corev1.NamespaceNodeLease)
	}
	name := a.GetName()
	if a.GetOperation() == admission.Create {
		l, ok := a.GetObject().(*coordinationv1.Lease)
		if !ok {
			return forbidden(a, "unexpected type %T", a.GetObject())
		}
		name = l.Name
	}
	if name != node {
		return forbidden(a, "can only access node lease with the same name as the requesting node")
	}
	return nil
}

// admitToken lets a node mint a service account token only bound to a
// pod, that pod being bound to the node: a token the node could use for
// something other than one of its pods would outlive the pod.
func (p *Plugin) admitToken(node string, a admission.Attributes) error {
	tr, ok := a.GetObject().(*authenticationv1.TokenRequest)
	if !ok {
		return forbidden(a, "unexpected type %T", a.GetObject())
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return forbidden(a, "node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return forbidden(a, "node requested token with a pod binding without a uid")
	}
	pod, err := p.pod(a, a.GetNamespace(), ref.Name)
	if err != nil {
		return err
	}
	if ref.UID != pod.UID {
		return forbidden(a, "the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID)
	}
	if pod.Spec.NodeName != node {
		return forbidden(a, "node requested token bound to a pod scheduled on a different node")
	}
	return nil
}
