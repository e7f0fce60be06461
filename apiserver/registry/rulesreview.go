package registry

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// RulesReviewREST serves selfsubjectrulesreviews: what the requesting
// user may do in a namespace, as the authorization modes' rule resolvers
// list it (`kubectl auth can-i --list`). Nothing is stored.
type RulesReviewREST struct {
	rules authorizer.RuleResolver
}

// NewRulesReviewREST returns the storage answering from rules.
func NewRulesReviewREST(rules authorizer.RuleResolver) *RulesReviewREST {
	return &RulesReviewREST{rules: rules}
}

// New returns an empty SelfSubjectRulesReview.
func (r *RulesReviewREST) New() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }

// Destroy has nothing to release.
func (r *RulesReviewREST) Destroy() {}

// NamespaceScoped is false: the namespace is in the spec, as upstream.
func (r *RulesReviewREST) NamespaceScoped() bool { return false }

// GetSingularName names one review in discovery.
func (r *RulesReviewREST) GetSingularName() string { return "selfsubjectrulesreview" }

// Create answers the review for the requesting user.
func (r *RulesReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectRulesReview: %T", obj))
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if review.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	res, nonRes, incomplete, err := r.rules.RulesFor(ctx, u, review.Spec.Namespace)
	out := &authorizationv1.SelfSubjectRulesReview{Spec: review.Spec}
	out.Status.Incomplete = incomplete
	if err != nil {
		out.Status.EvaluationError = err.Error()
	}
	out.Status.ResourceRules = []authorizationv1.ResourceRule{}
	for _, rule := range res {
		out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{
			Verbs: rule.GetVerbs(), APIGroups: rule.GetAPIGroups(), Resources: rule.GetResources(), ResourceNames: rule.GetResourceNames(),
		})
	}
	out.Status.NonResourceRules = []authorizationv1.NonResourceRule{}
	for _, rule := range nonRes {
		out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{
			Verbs: rule.GetVerbs(), NonResourceURLs: rule.GetNonResourceURLs(),
		})
	}
	return out, nil
}

var (
	_ rest.Creater              = &RulesReviewREST{}
	_ rest.Scoper               = &RulesReviewREST{}
	_ rest.SingularNameProvider = &RulesReviewREST{}
)
