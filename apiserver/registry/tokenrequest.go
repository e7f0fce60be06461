package registry

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"portal.dev/portal/apiserver/auth/serviceaccount"
)

// TokenIssuer signs ServiceAccount tokens.
type TokenIssuer interface {
	Issue(serviceaccount.Request) (string, time.Time, error)
}

// TokenREST serves serviceaccounts/token, the TokenRequest API: a POST of
// an authentication.k8s.io/v1 TokenRequest returns it with a signed token
// for the ServiceAccount in the path, for the audiences asked (the API's
// when none), bound to the Pod, Secret or Node named in boundObjectRef,
// as kube-apiserver does.
type TokenREST struct {
	accounts, pods, secrets, nodes *REST
	issuer                         TokenIssuer
	audiences                      []string
}

// NewTokenREST returns the token subresource of serviceaccounts. The
// stores are read to check what a token is for and bound to.
func NewTokenREST(accounts, pods, secrets, nodes *REST, issuer TokenIssuer, audiences []string) *TokenREST {
	return &TokenREST{accounts: accounts, pods: pods, secrets: secrets, nodes: nodes, issuer: issuer, audiences: audiences}
}

// New returns an empty TokenRequest.
func (r *TokenREST) New() runtime.Object { return &authenticationv1.TokenRequest{} }

// Destroy is a no-op: the ServiceAccount store owns the storage.
func (r *TokenREST) Destroy() {}

// GroupVersionKind tells discovery and the codecs that this subresource
// speaks authentication.k8s.io/v1 TokenRequest.
func (r *TokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
}

var tokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest").GroupKind()

// Create issues a token for the ServiceAccount name.
func (r *TokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest: %T", obj))
	}
	namespace, _ := genericapirequest.NamespaceFrom(ctx)
	req = req.DeepCopy()
	if req.Spec.ExpirationSeconds == nil {
		secs := int64(serviceaccount.DefaultExpiration / time.Second)
		req.Spec.ExpirationSeconds = &secs
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = r.audiences
	}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind, name, errs)
	}
	obj, err := r.accounts.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa := obj.(*corev1.ServiceAccount)
	tr := serviceaccount.Request{
		Namespace:      namespace,
		ServiceAccount: serviceaccount.Ref{Name: sa.Name, UID: sa.UID},
		Audiences:      req.Spec.Audiences,
		Expiration:     time.Duration(*req.Spec.ExpirationSeconds) * time.Second,
	}
	if err := r.bind(ctx, sa, req.Spec.BoundObjectRef, &tr); err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	if len(options.DryRun) > 0 {
		return req, nil
	}
	token, exp, err := r.issuer.Issue(tr)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	req.Name, req.Namespace = name, namespace
	req.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
	return req, nil
}

func validateTokenRequest(req *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	// The bounds are compared in seconds: a Duration of huge seconds
	// overflows and could wrap back into range.
	secs := *req.Spec.ExpirationSeconds
	path := field.NewPath("spec", "expirationSeconds")
	if secs < int64(serviceaccount.MinExpiration/time.Second) {
		errs = append(errs, field.Invalid(path, secs, "may not specify a duration less than 10 minutes"))
	}
	if secs > int64(serviceaccount.MaxExpiration/time.Second) {
		errs = append(errs, field.Invalid(path, secs, "may not specify a duration larger than 2^32 seconds"))
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		refPath := field.NewPath("spec", "boundObjectRef")
		switch {
		case ref.Kind != "Pod" && ref.Kind != "Secret" && ref.Kind != "Node":
			errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, []string{"Pod", "Node", "Secret"}))
		case ref.APIVersion != "" && ref.APIVersion != "v1":
			errs = append(errs, field.NotSupported(refPath.Child("apiVersion"), ref.APIVersion, []string{"v1"}))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(refPath.Child("name"), ""))
		}
	}
	return errs
}

// bind looks up the object ref names, checks its UID and, for a Pod, that
// it runs as sa, and records it in tr.
func (r *TokenREST) bind(ctx context.Context, sa *corev1.ServiceAccount, ref *authenticationv1.BoundObjectReference, tr *serviceaccount.Request) error {
	if ref == nil {
		return nil
	}
	var store *REST
	switch ref.Kind {
	case "Pod":
		store = r.pods
	case "Secret":
		store = r.secrets
	case "Node":
		store = r.nodes
	}
	obj, err := store.Get(ctx, ref.Name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// The store names the resource of the request, serviceaccounts.
		return apierrors.NewNotFound(store.DefaultQualifiedResource, ref.Name)
	}
	if err != nil {
		return err
	}
	meta, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if ref.UID != "" && ref.UID != meta.GetUID() {
		return apierrors.NewConflict(store.DefaultQualifiedResource, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	bound := &serviceaccount.Ref{Name: meta.GetName(), UID: meta.GetUID()}
	switch o := obj.(type) {
	case *corev1.Pod:
		if o.Spec.ServiceAccountName != sa.Name {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", sa.Name))
		}
		tr.Pod = bound
	case *corev1.Secret:
		tr.Secret = bound
	case *corev1.Node:
		tr.Node = bound
	}
	return nil
}

var _ rest.NamedCreater = &TokenREST{}
var _ rest.GroupVersionKindProvider = &TokenREST{}
