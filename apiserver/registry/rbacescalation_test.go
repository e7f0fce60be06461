package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// fakeRules holds a user's rules as a set of "verb resource" strings.
type fakeRules struct {
	held  map[string]bool
	roles map[string][]rbacv1.PolicyRule
}

func (f fakeRules) ConfirmNoEscalation(u user.Info, ns string, rules []rbacv1.PolicyRule) error {
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, res := range r.Resources {
				if !f.held[v+" "+res] {
					return errors.New("is attempting to grant RBAC permissions not currently held")
				}
			}
		}
	}
	return nil
}

func (f fakeRules) RoleRefRules(ref rbacv1.RoleRef, ns string) ([]rbacv1.PolicyRule, error) {
	rules, ok := f.roles[ref.Name]
	if !ok {
		return nil, apierrors.NewNotFound(rbacv1.Resource("clusterroles"), ref.Name)
	}
	return rules, nil
}

// allowVerbs allows the escalate or bind verbs listed, for anyone.
type allowVerbs map[string]bool

func (a allowVerbs) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if a[attrs.GetVerb()+" "+attrs.GetResource()+" "+attrs.GetName()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func TestEscalation(t *testing.T) {
	podsGet := []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}
	secretsGet := []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}
	rules := fakeRules{held: map[string]bool{"get pods": true},
		roles: map[string][]rbacv1.PolicyRule{"pod-reader": podsGet, "secret-reader": secretsGet}}
	dave := &user.DefaultInfo{Name: "dave", Groups: []string{user.AllAuthenticated}}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	meta := metav1.ObjectMeta{Name: "x", Namespace: "a"}
	binding := func(role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}
	}
	for _, tc := range []struct {
		name    string
		u       user.Info
		allowed allowVerbs
		obj     runtime.Object
		want    string // "" allowed, else the error's kind
	}{
		{"role with held rules", dave, nil, &rbacv1.Role{ObjectMeta: meta, Rules: podsGet}, ""},
		{"role with rules not held", dave, nil, &rbacv1.Role{ObjectMeta: meta, Rules: secretsGet}, "forbidden"},
		{"role with rules not held, may escalate", dave, allowVerbs{"escalate roles x": true}, &rbacv1.Role{ObjectMeta: meta, Rules: secretsGet}, ""},
		{"system:masters writes anything", admin, nil, &rbacv1.Role{ObjectMeta: meta, Rules: secretsGet}, ""},
		{"binding to a held role", dave, nil, binding("pod-reader"), ""},
		{"binding to a role not held", dave, nil, binding("secret-reader"), "forbidden"},
		{"binding to a role not held, may bind it", dave, allowVerbs{"bind clusterroles secret-reader": true}, binding("secret-reader"), ""},
		{"binding to a missing role", dave, nil, binding("missing"), "notfound"},
		{"binding to a missing role by system:masters", admin, nil, binding("missing"), ""},
		{"aggregation rule needs full authority", dave, allowVerbs{}, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"},
			AggregationRule: &rbacv1.AggregationRule{}}, "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Escalation{Authorizer: authorizer.AuthorizerFunc(tc.allowed.Authorize), Rules: rules}
			ctx := genericapirequest.WithUser(genericapirequest.WithNamespace(context.Background(), "a"), tc.u)
			err := e.check(ctx, tc.obj, nil)
			var got string
			switch {
			case err == nil:
			case apierrors.IsForbidden(err):
				got = "forbidden"
			case apierrors.IsNotFound(err):
				got = "notfound"
			default:
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q (%v), want %q", got, err, tc.want)
			}
			if got == "forbidden" && !strings.Contains(err.Error(), "forbidden") {
				t.Fatalf("message %q", err)
			}
		})
	}
}
