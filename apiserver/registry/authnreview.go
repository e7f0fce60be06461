package registry

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// SelfSubjectReviewREST serves authentication.k8s.io selfsubjectreviews
// (`kubectl auth whoami`): who the server takes the requester for.
// Nothing is stored.
type SelfSubjectReviewREST struct{}

// New returns an empty SelfSubjectReview.
func (SelfSubjectReviewREST) New() runtime.Object { return &authenticationv1.SelfSubjectReview{} }

// Destroy has nothing to release.
func (SelfSubjectReviewREST) Destroy() {}

// NamespaceScoped is false, as upstream.
func (SelfSubjectReviewREST) NamespaceScoped() bool { return false }

// GetSingularName names one review in discovery.
func (SelfSubjectReviewREST) GetSingularName() string { return "selfsubjectreview" }

// Create answers with the requester's user name, UID, groups and extra.
func (SelfSubjectReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	if _, ok := obj.(*authenticationv1.SelfSubjectReview); !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectReview: %T", obj))
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	return &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Now()},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: userInfo(u)},
	}, nil
}

// TokenReviewREST serves authentication.k8s.io tokenreviews: whether a
// bearer token authenticates with this server, and as whom, for
// components that accept the cluster's tokens themselves. The token is
// checked by the same authenticator every request passes. Nothing is
// stored, and the token is neither logged nor echoed in errors.
type TokenReviewREST struct {
	authn authenticator.Request
	// apiAudiences are the audiences a review that names none checks
	// the token for: the server's own.
	apiAudiences authenticator.Audiences
}

// NewTokenReviewREST returns the storage checking tokens with authn.
func NewTokenReviewREST(authn authenticator.Request, apiAudiences []string) *TokenReviewREST {
	return &TokenReviewREST{authn: authn, apiAudiences: apiAudiences}
}

// New returns an empty TokenReview.
func (r *TokenReviewREST) New() runtime.Object { return &authenticationv1.TokenReview{} }

// Destroy has nothing to release.
func (r *TokenReviewREST) Destroy() {}

// NamespaceScoped is false, as upstream.
func (r *TokenReviewREST) NamespaceScoped() bool { return false }

// GetSingularName names one review in discovery.
func (r *TokenReviewREST) GetSingularName() string { return "tokenreview" }

// Create authenticates the review's token as if it came with a request.
func (r *TokenReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authenticationv1.TokenReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenReview: %T", obj))
	}
	if review.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	auds := authenticator.Audiences(review.Spec.Audiences)
	if len(auds) == 0 {
		auds = r.apiAudiences
	}
	req := (&http.Request{Header: http.Header{}}).WithContext(ctx)
	if len(auds) > 0 {
		req = req.WithContext(authenticator.WithAudiences(ctx, auds))
	}
	req.Header.Set("Authorization", "Bearer "+review.Spec.Token)
	resp, authenticated, err := r.authn.AuthenticateRequest(req)

	out := review.DeepCopy()
	// The answer carries no token: a review returned or logged must not
	// let anyone replay it.
	out.Spec.Token = ""
	out.Status = authenticationv1.TokenReviewStatus{Authenticated: authenticated && resp != nil}
	if err != nil {
		out.Status.Error = err.Error()
	}
	if !out.Status.Authenticated {
		return out, nil
	}
	if len(auds) > 0 && len(auds.Intersect(resp.Audiences)) == 0 && len(resp.Audiences) > 0 {
		out.Status = authenticationv1.TokenReviewStatus{Error: "token audiences don't match"}
		return out, nil
	}
	out.Status.User = userInfo(resp.User)
	out.Status.Audiences = resp.Audiences
	if len(out.Status.Audiences) == 0 && len(review.Spec.Audiences) > 0 {
		// An authenticator that knows no audiences (certificates, the
		// token file) accepts the token for any the reviewer asked.
		out.Status.Audiences = review.Spec.Audiences
	}
	return out, nil
}

func userInfo(u user.Info) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		info.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range extra {
			info.Extra[k] = v
		}
	}
	return info
}

var (
	_ rest.Creater              = SelfSubjectReviewREST{}
	_ rest.SingularNameProvider = SelfSubjectReviewREST{}
	_ rest.Creater              = &TokenReviewREST{}
	_ rest.Scoper               = &TokenReviewREST{}
	_ rest.SingularNameProvider = &TokenReviewREST{}
)
