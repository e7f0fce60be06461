package registry

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// AccessReviewREST serves one of authorization.k8s.io's access reviews:
// selfsubjectaccessreviews (`kubectl auth can-i`), subjectaccessreviews
// (a component asking about another user) and the namespaced
// localsubjectaccessreviews. Each create is answered by the server's
// authorizer, the one every request passes, and nothing is stored.
type AccessReviewREST struct {
	authz authorizer.Authorizer
	kind  accessReviewKind
}

type accessReviewKind int

const (
	selfSubject accessReviewKind = iota
	subject
	localSubject
)

// NewSelfSubjectAccessReviewREST answers whether the requester may do
// what the review's spec describes.
func NewSelfSubjectAccessReviewREST(a authorizer.Authorizer) *AccessReviewREST {
	return &AccessReviewREST{authz: a, kind: selfSubject}
}

// NewSubjectAccessReviewREST answers whether the user the review names
// may do what its spec describes.
func NewSubjectAccessReviewREST(a authorizer.Authorizer) *AccessReviewREST {
	return &AccessReviewREST{authz: a, kind: subject}
}

// NewLocalSubjectAccessReviewREST is NewSubjectAccessReviewREST for one
// namespace: the review's resource must be in the namespace it is
// created in.
func NewLocalSubjectAccessReviewREST(a authorizer.Authorizer) *AccessReviewREST {
	return &AccessReviewREST{authz: a, kind: localSubject}
}

// New returns an empty review of the kind served.
func (r *AccessReviewREST) New() runtime.Object {
	switch r.kind {
	case selfSubject:
		return &authorizationv1.SelfSubjectAccessReview{}
	case localSubject:
		return &authorizationv1.LocalSubjectAccessReview{}
	}
	return &authorizationv1.SubjectAccessReview{}
}

// Destroy has nothing to release.
func (r *AccessReviewREST) Destroy() {}

// NamespaceScoped is true only for local reviews, as upstream.
func (r *AccessReviewREST) NamespaceScoped() bool { return r.kind == localSubject }

// GetSingularName names one review in discovery.
func (r *AccessReviewREST) GetSingularName() string {
	switch r.kind {
	case selfSubject:
		return "selfsubjectaccessreview"
	case localSubject:
		return "localsubjectaccessreview"
	}
	return "subjectaccessreview"
}

// Create answers the review.
func (r *AccessReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	spec, u, err := r.subject(ctx, obj)
	if err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	decision, reason, evalErr := r.authz.Authorize(ctx, accessAttributes(u, spec))
	status := authorizationv1.SubjectAccessReviewStatus{
		Allowed: decision == authorizer.DecisionAllow,
		Denied:  decision == authorizer.DecisionDeny,
		Reason:  reason,
	}
	if evalErr != nil {
		status.EvaluationError = evalErr.Error()
	}
	switch out := obj.DeepCopyObject().(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		out.Status = status
		return out, nil
	case *authorizationv1.LocalSubjectAccessReview:
		out.Status = status
		return out, nil
	case *authorizationv1.SubjectAccessReview:
		out.Status = status
		return out, nil
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("not an access review: %T", obj))
}

// subject validates the review as upstream does and returns the
// attributes' source and the user asked about.
func (r *AccessReviewREST) subject(ctx context.Context, obj runtime.Object) (authorizationv1.SubjectAccessReviewSpec, user.Info, error) {
	var none authorizationv1.SubjectAccessReviewSpec
	switch review := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		gk := authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind()
		if errs := validateAttributes(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes); len(errs) > 0 {
			return none, nil, apierrors.NewInvalid(gk, "", errs)
		}
		u, ok := genericapirequest.UserFrom(ctx)
		if !ok {
			return none, nil, apierrors.NewBadRequest("no user present on request")
		}
		return authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: review.Spec.ResourceAttributes, NonResourceAttributes: review.Spec.NonResourceAttributes,
		}, u, nil
	case *authorizationv1.SubjectAccessReview:
		gk := authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview").GroupKind()
		if errs := validateSubject(review.Spec); len(errs) > 0 {
			return none, nil, apierrors.NewInvalid(gk, "", errs)
		}
		return review.Spec, subjectUser(review.Spec), nil
	case *authorizationv1.LocalSubjectAccessReview:
		gk := authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview").GroupKind()
		errs := validateSubject(review.Spec)
		if review.Spec.NonResourceAttributes != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), review.Spec.NonResourceAttributes, "disallowed on this kind of request"))
		}
		ns := genericapirequest.NamespaceValue(ctx)
		if ra := review.Spec.ResourceAttributes; ra != nil && ra.Namespace != ns {
			errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), ra.Namespace,
				fmt.Sprintf("must match the namespace the review is created in (%q)", ns)))
		}
		if len(errs) > 0 {
			return none, nil, apierrors.NewInvalid(gk, "", errs)
		}
		return review.Spec, subjectUser(review.Spec), nil
	}
	return none, nil, apierrors.NewBadRequest(fmt.Sprintf("not an access review: %T", obj))
}

// validateAttributes requires exactly one of the attribute kinds.
func validateAttributes(res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) field.ErrorList {
	spec := field.NewPath("spec")
	switch {
	case res == nil && nonRes == nil:
		return field.ErrorList{field.Required(spec.Child("resourceAttributes"), "exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	case res != nil && nonRes != nil:
		return field.ErrorList{field.Invalid(spec.Child("nonResourceAttributes"), nonRes, "cannot be specified in combination with resourceAttributes")}
	}
	return nil
}

func validateSubject(spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

func subjectUser(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	extra := map[string][]string{}
	for k, v := range spec.Extra {
		extra[k] = v
	}
	return &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups, Extra: extra}
}

// accessAttributes is the request the review describes, as the
// authorizer sees a real one.
func accessAttributes(u user.Info, spec authorizationv1.SubjectAccessReviewSpec) authorizer.Attributes {
	a := authorizer.AttributesRecord{User: u}
	if ra := spec.ResourceAttributes; ra != nil {
		a.Verb, a.Namespace, a.Name = ra.Verb, ra.Namespace, ra.Name
		a.APIGroup, a.APIVersion = ra.Group, ra.Version
		a.Resource, a.Subresource = ra.Resource, ra.Subresource
		a.ResourceRequest = true
		return a
	}
	a.Verb, a.Path = spec.NonResourceAttributes.Verb, spec.NonResourceAttributes.Path
	return a
}

var (
	_ rest.Creater              = &AccessReviewREST{}
	_ rest.Scoper               = &AccessReviewREST{}
	_ rest.SingularNameProvider = &AccessReviewREST{}
)
