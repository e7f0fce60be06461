package registry

import (
	"context"
	"net/http"

	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage/names"
	"portal.dev/portal/allocator"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"portal.dev/portal/apiserver/defaults"
	"portal.dev/portal/apiserver/svcconfig"
	"portal.dev/portal/apiserver/validation"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Config carries the cluster settings strategies need.
type Config struct {
	Service svcconfig.ServiceConfig
	// Allocator reserves Service cluster IPs and node ports; nil leaves
	// them as the client wrote them (tests of the strategies alone).
	Allocator *allocator.Allocator
	// AgentTransport reaches node agents for pods/log, with the API
	// server's client certificate.
	AgentTransport http.RoundTripper
	// Tokens signs the tokens of serviceaccounts/token; nil leaves the
	// subresource out.
	Tokens TokenIssuer
	// APIAudiences are the audiences of a token asked for without any.
	APIAudiences []string
	// Escalation checks writes of roles and bindings against what their
	// writer holds; nil checks nothing.
	Escalation *Escalation
	// Authorizer answers the access reviews of authorization.k8s.io,
	// Authenticator the token reviews of authentication.k8s.io: the
	// server's own, so a review says what a request would get.
	Authorizer    authorizer.Authorizer
	Authenticator authenticator.Request
}

// typed adapts validation functions of one kind to Hooks.
func typed[T runtime.Object](create func(T) field.ErrorList, update func(T, T) field.ErrorList) Hooks {
	return Hooks{
		Validate:       func(obj runtime.Object) field.ErrorList { return create(obj.(T)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList { return update(obj.(T), old.(T)) },
	}
}

// withStatus adds the status subresource's validation.
func withStatus[T runtime.Object](h Hooks, status func(T, T) field.ErrorList) Hooks {
	h.ValidateStatusUpdate = func(obj, old runtime.Object) field.ErrorList { return status(obj.(T), old.(T)) }
	return h
}

// objectMeta returns the ObjectMeta embedded in every served object.
func objectMeta(obj runtime.Object) *metav1.ObjectMeta {
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
}

func namespaceHooks() Hooks {
	h := withStatus(typed(validation.ValidateNamespace, validation.ValidateNamespaceUpdate),
		validation.ValidateNamespaceStatusUpdate)
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
	// Nodes register with their status (the agent writes it on create),
	// so create keeps it: see Kind.KeepStatusOnCreate.
	return typed(validation.ValidateNode, validation.ValidateNodeUpdate)
}

func podHooks() Hooks {
	h := typed(validation.ValidatePod, validation.ValidatePodUpdate)
	h.PrepareForCreate = func(obj runtime.Object) {
		pod := obj.(*corev1.Pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
	}
	return h
}

func serviceHooks(cfg Config) Hooks {
	h := withStatus(typed(
		func(svc *corev1.Service) field.ErrorList { return validation.ValidateService(svc, cfg.Service) },
		func(svc, old *corev1.Service) field.ErrorList {
			return validation.ValidateServiceUpdate(svc, old, cfg.Service)
		}), validation.ValidateServiceStatusUpdate)
	return h
}

// serviceBeginCreate settles a Service's IP families and reserves its
// cluster IPs and node ports before validation, as upstream's service REST
// does. The returned FinishFunc gives the reservations back if the create
// fails after all.
func serviceBeginCreate(cfg Config, stored *storedServices) genericregistry.BeginCreateFunc {
	return func(ctx context.Context, obj runtime.Object, opts *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		svc := obj.(*corev1.Service)
		// Reservations name their Service, so settle the name and
		// namespace now (BeforeCreate would do it only later).
		if ns, ok := genericapirequest.NamespaceFrom(ctx); ok && svc.Namespace == "" {
			svc.Namespace = ns
		}
		if svc.Name == "" && svc.GenerateName != "" {
			svc.Name = names.SimpleNameGenerator.GenerateName(svc.GenerateName)
		}
		if errs := defaults.ServiceIPFamilies(svc, nil, cfg.Service); len(errs) > 0 {
			return nil, invalidService(svc, errs)
		}
		return allocate(ctx, cfg, stored, svc, nil, len(opts.DryRun) > 0)
	}
}

// serviceBeginUpdate does the same for updates, carrying allocated values
// the client left out over from the stored Service; what the Service no
// longer holds is released once the update is stored.
func serviceBeginUpdate(cfg Config, stored *storedServices) genericregistry.BeginUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object, opts *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		svc, oldSvc := obj.(*corev1.Service), old.(*corev1.Service)
		if errs := defaults.ServiceIPFamilies(svc, oldSvc, cfg.Service); len(errs) > 0 {
			return nil, invalidService(svc, errs)
		}
		defaults.ServiceTypeTransition(svc, oldSvc)
		return allocate(ctx, cfg, stored, svc, oldSvc, len(opts.DryRun) > 0)
	}
}

// serviceAfterDelete gives a deleted Service's reservations back.
func serviceAfterDelete(cfg Config) genericregistry.AfterDeleteFunc {
	return func(obj runtime.Object, opts *metav1.DeleteOptions) {
		if cfg.Allocator == nil || (opts != nil && len(opts.DryRun) > 0) {
			return
		}
		cfg.Allocator.Release(context.Background(), obj.(*corev1.Service))
	}
}

func invalidService(svc *corev1.Service, errs field.ErrorList) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
}

func endpointsHooks() Hooks {
	return typed(validation.ValidateEndpoints, validation.ValidateEndpointsUpdate)
}
func secretHooks() Hooks { return typed(validation.ValidateSecret, validation.ValidateSecretUpdate) }
func configMapHooks() Hooks {
	return typed(validation.ValidateConfigMap, validation.ValidateConfigMapUpdate)
}
func eventHooks() Hooks { return typed(validation.ValidateEvent, validation.ValidateEventUpdate) }
func serviceAccountHooks() Hooks {
	return typed(validation.ValidateServiceAccount, validation.ValidateServiceAccountUpdate)
}
func endpointSliceHooks() Hooks {
	h := typed(validation.ValidateEndpointSlice, validation.ValidateEndpointSliceUpdate)
	// EndpointSlices have no status, but controllers track their writes
	// by generation, as upstream: 1 on create, +1 when anything but
	// metadata (labels aside) changes.
	h.PrepareForCreate = func(obj runtime.Object) { obj.(*discoveryv1.EndpointSlice).Generation = 1 }
	h.PrepareForUpdate = func(obj, old runtime.Object) {
		s, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
		if s.AddressType != o.AddressType || !apiequality.Semantic.DeepEqual(s.Endpoints, o.Endpoints) ||
			!apiequality.Semantic.DeepEqual(s.Ports, o.Ports) || !apiequality.Semantic.DeepEqual(s.Labels, o.Labels) {
			s.Generation = o.Generation + 1
		}
	}
	return h
}
func leaseHooks() Hooks { return typed(validation.ValidateLease, validation.ValidateLeaseUpdate) }
func ingressHooks() Hooks {
	return withStatus(typed(validation.ValidateIngress, validation.ValidateIngressUpdate),
		validation.ValidateIngressStatusUpdate)
}
func ingressClassHooks() Hooks {
	return typed(validation.ValidateIngressClass, validation.ValidateIngressClassUpdate)
}

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
