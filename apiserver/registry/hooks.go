package registry

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Config carries the cluster settings strategies need.
type Config struct{}

// metaHooks validates only metadata, with the given name rule.
func metaHooks(namespaced bool, nameFn apivalidation.ValidateNameFunc) Hooks {
	return Hooks{
		Validate: func(obj runtime.Object) field.ErrorList {
			return apivalidation.ValidateObjectMeta(objectMeta(obj), namespaced, nameFn, field.NewPath("metadata"))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return apivalidation.ValidateObjectMetaUpdate(objectMeta(obj), objectMeta(old), field.NewPath("metadata"))
		},
	}
}

// objectMeta returns the ObjectMeta embedded in every served object.
func objectMeta(obj runtime.Object) *metav1.ObjectMeta {
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
}

func namespaceHooks() Hooks {
	h := metaHooks(false, apivalidation.ValidateNamespaceName)
	h.PrepareForCreate = func(obj runtime.Object) {
		ns := obj.(*corev1.Namespace)
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
		setNameLabel(ns)
	}
	h.PrepareForUpdate = func(obj, old runtime.Object) {
		ns, oldNs := obj.(*corev1.Namespace), old.(*corev1.Namespace)
		// Only the finalize subresource changes spec.finalizers.
		ns.Spec.Finalizers = oldNs.Spec.Finalizers
		setNameLabel(ns)
	}
	return h
}

// setNameLabel keeps the immutable kubernetes.io/metadata.name label that
// upstream puts on every namespace, so selectors can name namespaces.
func setNameLabel(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

func nodeHooks() Hooks {
	h := metaHooks(false, apivalidation.NameIsDNSSubdomain)
	// Nodes register with their status (the agent writes it on create).
	return h
}

func podHooks() Hooks {
	h := metaHooks(true, apivalidation.NameIsDNSSubdomain)
	h.PrepareForCreate = func(obj runtime.Object) {
		pod := obj.(*corev1.Pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
	}
	return h
}

func serviceHooks(cfg Config) Hooks {
	return metaHooks(true, apivalidation.NameIsDNS1035Label)
}

func endpointsHooks() Hooks      { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func secretHooks() Hooks         { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func configMapHooks() Hooks      { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func eventHooks() Hooks          { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func serviceAccountHooks() Hooks { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func endpointSliceHooks() Hooks  { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func leaseHooks() Hooks          { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func ingressHooks() Hooks        { return metaHooks(true, apivalidation.NameIsDNSSubdomain) }
func ingressClassHooks() Hooks   { return metaHooks(false, apivalidation.NameIsDNSSubdomain) }

// podDeleteStrategy gives pods upstream's graceful deletion: a pod bound to
// a node stays, terminating, until its node agent confirms the processes are
// gone; an unbound or finished pod goes at once.
type podDeleteStrategy struct{ runtime.ObjectTyper }

func (podDeleteStrategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	pod := obj.(*corev1.Pod)
	period := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		period = 0
	}
	options.GracePeriodSeconds = &period
	return true
}

var _ rest.RESTGracefulDeleteStrategy = podDeleteStrategy{}
