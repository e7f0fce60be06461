package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authorizer allows a request when a rule the user holds grants it, and
// has no opinion otherwise, so that the next authorizer of a chain may
// still allow it (the generic server answers 403 when none does).
type Authorizer struct {
	r *Resolver
}

// New returns the RBAC authorizer over the given caches.
func New(l Listers) *Authorizer { return &Authorizer{r: NewResolver(l)} }

// Resolver returns the authorizer's rule resolver.
func (a *Authorizer) Resolver() *Resolver { return a.r }

// Authorize implements authorizer.Authorizer. The walk stops at the first
// rule that allows the request. On a denial the reason names the bindings
// whose roles could not be read, as upstream's does; the generic server
// puts it after its own "User ... cannot ..." sentence.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	allowed := false
	var errs []error
	a.r.visitRulesFor(u, attrs.GetNamespace(), func(rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		allowed = ruleAllows(attrs, rule)
		return !allowed
	})
	if allowed {
		return authorizer.DecisionAllow, "", nil
	}
	if len(errs) > 0 {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs)), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: RBAC's
// decisions carry no conditions.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer; RBAC has no
// conditions to evaluate, so it fails closed.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor implements authorizer.RuleResolver: the rules u holds in
// namespace, for SelfSubjectRulesReview. incomplete is true when a binding's
// role could not be read.
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	rules, err := a.r.RulesFor(u, namespace)
	var res []authorizer.ResourceRuleInfo
	var nonRes []authorizer.NonResourceRuleInfo
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		res = append(res, &authorizer.DefaultResourceRuleInfo{
			Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames,
		})
	}
	return res, nonRes, err != nil, err
}

var (
	_ authorizer.Authorizer   = &Authorizer{}
	_ authorizer.RuleResolver = &Authorizer{}
)
