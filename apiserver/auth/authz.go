package auth

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
)

// The modes of --authorization-mode, as kube-apiserver names them.
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeNode        = "Node"
	ModeRBAC        = "RBAC"
)

// DefaultModes is the --authorization-mode a server runs with unless told,
// kube-apiserver's recommended one.
var DefaultModes = []string{ModeNode, ModeRBAC}

// ParseModes splits a --authorization-mode value and checks each mode is
// known and given once.
func ParseModes(value string) ([]string, error) {
	var modes []string
	seen := map[string]bool{}
	for _, m := range strings.Split(value, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case ModeAlwaysAllow, ModeNode, ModeRBAC:
		default:
			return nil, fmt.Errorf("--authorization-mode: unknown mode %q (known: %s, %s, %s)", m, ModeAlwaysAllow, ModeNode, ModeRBAC)
		}
		if seen[m] {
			return nil, fmt.Errorf("--authorization-mode: mode %q given twice", m)
		}
		seen[m] = true
		modes = append(modes, m)
	}
	return modes, nil
}

// Named is one authorizer of a chain, with the mode name that prefixes the
// reasons it gives.
type Named struct {
	Mode       string
	Authorizer authorizer.Authorizer
	// Rules, when set, lists what the mode allows a user, for
	// SelfSubjectRulesReview.
	Rules authorizer.RuleResolver
}

// Chain returns the authorizer that asks Builtin first, then each mode in
// order; the first to allow or deny decides, and a request none allows is
// refused. It also returns the union of the modes' rule resolvers.
func Chain(modes ...Named) (authorizer.Authorizer, authorizer.RuleResolver, error) {
	named := []union.NamedAuthorizer{{AuthorizerName: "Portal", Authorizer: Builtin}}
	resolvers := []authorizer.RuleResolver{Builtin}
	for _, m := range modes {
		named = append(named, union.NamedAuthorizer{AuthorizerName: m.Mode, Authorizer: m.Authorizer})
		if m.Rules != nil {
			resolvers = append(resolvers, m.Rules)
		}
	}
	a, err := union.New(named...)
	if err != nil {
		return nil, nil, err
	}
	return a, union.NewRuleResolvers(resolvers...), nil
}

// Builtin holds the rules that come before any mode: the system:masters
// group may do everything (admin.kubeconfig and the API server's own
// loopback client are in it), and anonymous users may only read the public
// paths. Everyone else gets no opinion, for the modes to decide.
var Builtin builtin

type builtin struct{}

// Authorize implements authorizer.Authorizer.
func (builtin) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	if u == nil {
		return authorizer.DecisionDeny, "no user", nil
	}
	if u.GetName() == user.Anonymous {
		if !a.IsResourceRequest() && a.GetVerb() == "get" && IsPublicPath(a.GetPath()) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "anonymous access is limited to health and version endpoints", nil
	}
	if privileged(u) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer; the builtin
// rules have no conditions.
func (b builtin) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(b.Authorize(ctx, a))
}

// EvaluateConditions implements authorizer.Authorizer and fails closed.
func (builtin) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor implements authorizer.RuleResolver: everything for
// system:masters, nothing for others.
func (builtin) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	if !privileged(u) {
		return nil, nil, false, nil
	}
	return []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{
			Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
		}}, []authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{
			Verbs: []string{"*"}, NonResourceURLs: []string{"*"},
		}}, false, nil
}

func privileged(u user.Info) bool {
	for _, g := range u.GetGroups() {
		if g == user.SystemPrivilegedGroup {
			return true
		}
	}
	return false
}
