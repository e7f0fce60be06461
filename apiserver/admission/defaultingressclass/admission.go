// Package defaultingressclass is the API server's DefaultIngressClass
// admission plugin, as upstream's of the same name: a new Ingress that names
// no class, neither in spec.ingressClassName nor in the legacy annotation
// kubernetes.io/ingress.class, gets the name of the IngressClass marked
// default with the annotation ingressclass.kubernetes.io/is-default-class
// "true". It acts on creates only, so an Ingress stored without a class
// keeps none, and changing the default later moves no existing Ingress.
//
// It reads IngressClasses from the API server's shared informers, as
// upstream does; a class created a moment before an Ingress may not be
// seen yet.
package defaultingressclass

import (
	"context"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/klog/v2"
)

// PluginName is the plugin's name, upstream's.
const PluginName = "DefaultIngressClass"

// Plugin fills in the class of new Ingresses. Make one with New; it needs
// the informer factory (SetExternalKubeInformerFactory) before use.
type Plugin struct {
	*admission.Handler
	classes networkinglisters.IngressClassLister
}

var _ admission.MutationInterface = (*Plugin)(nil)

// New returns a plugin that handles creates.
func New() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create)}
}

// SetExternalKubeInformerFactory makes the plugin read IngressClasses
// through f and wait for its cache before the first decision.
func (p *Plugin) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	inf := f.Networking().V1().IngressClasses()
	p.classes = inf.Lister()
	p.SetReadyFunc(inf.Informer().HasSynced)
}

// ValidateInitialization fails when the plugin has no informer factory.
func (p *Plugin) ValidateInitialization() error {
	if p.classes == nil {
		return fmt.Errorf("%s: no IngressClass lister", PluginName)
	}
	return nil
}

// Admit sets spec.ingressClassName of a new Ingress that names no class.
func (p *Plugin) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != networkingv1.Resource("ingresses") || a.GetSubresource() != "" {
		return nil
	}
	ing, ok := a.GetObject().(*networkingv1.Ingress)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("%s: got %T, want an Ingress", PluginName, a.GetObject()))
	}
	if ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := ing.Annotations[networkingv1beta1.AnnotationIngressClass]; ok {
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, fmt.Errorf("not yet ready to handle request"))
	}
	classes, err := p.classes.List(labels.Everything())
	if err != nil {
		return admission.NewForbidden(a, err)
	}
	def := Default(classes)
	if def == nil {
		return nil
	}
	klog.V(4).InfoS("Defaulting the class of an Ingress", "ingress", klog.KRef(a.GetNamespace(), ing.Name), "class", def.Name)
	name := def.Name
	ing.Spec.IngressClassName = &name
	return nil
}

// Default returns the default class among classes, nil when none is
// marked. When several are, the newest wins (ties go to the first name),
// as upstream decides, so that installing a new default class takes over
// without first unmarking the old one.
func Default(classes []*networkingv1.IngressClass) *networkingv1.IngressClass {
	var marked []*networkingv1.IngressClass
	for _, c := range classes {
		if c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			marked = append(marked, c)
		}
	}
	if len(marked) == 0 {
		return nil
	}
	slices.SortFunc(marked, func(a, b *networkingv1.IngressClass) int {
		if d := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return marked[0]
}
