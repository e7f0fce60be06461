package route

import (
	networkingv1 "k8s.io/api/networking/v1"
)

// Ours reports whether the Watcher serves ing: it is in the watched
// namespace, and its spec.ingressClassName names the served IngressClass
// whose spec.controller is ControllerName, or (without a class name) its
// legacy kubernetes.io/ingress.class annotation is the served class, or
// (with neither) the served class is marked the default class.
func (w *Watcher) Ours(ing *networkingv1.Ingress) bool {
	if ing == nil || w.opts.WatchNamespace != "" && ing.Namespace != w.opts.WatchNamespace {
		return false
	}
	if name := ing.Spec.IngressClassName; name != nil {
		return *name == w.opts.IngressClass && w.ourClass() != nil
	}
	if a, ok := ing.Annotations[LegacyClassAnnotation]; ok {
		return a == w.opts.IngressClass
	}
	c := w.ourClass()
	return c != nil && c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
}

// ourClass returns the served IngressClass, or nil when it does not
// exist or belongs to another controller.
func (w *Watcher) ourClass() *networkingv1.IngressClass {
	c, err := w.classes.Get(w.opts.IngressClass)
	if err != nil || c.Spec.Controller != ControllerName {
		return nil
	}
	return c
}
