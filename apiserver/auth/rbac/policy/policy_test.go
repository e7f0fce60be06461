package policy_test

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"portal.dev/portal/apiserver/auth/rbac"
	"portal.dev/portal/apiserver/auth/rbac/policy"
	"portal.dev/portal/controller/clusterroleaggregation"
)

// bootstrapAuthorizer is the RBAC authorizer over the bootstrap policy,
// with aggregated roles filled as the aggregation controller fills them.
func bootstrapAuthorizer(t *testing.T) *rbac.Authorizer {
	t.Helper()
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	v1 := f.Rbac().V1()
	roles := policy.ClusterRoles(nil)
	var ptrs []*rbacv1.ClusterRole
	for i := range roles {
		ptrs = append(ptrs, &roles[i])
	}
	for _, r := range ptrs {
		if r.AggregationRule != nil {
			rules, err := clusterroleaggregation.Aggregate(r, ptrs)
			if err != nil {
				t.Fatal(err)
			}
			r.Rules = rules
		}
		add(t, v1.ClusterRoles().Informer().GetIndexer(), r)
	}
	for _, b := range policy.ClusterRoleBindings() {
		add(t, v1.ClusterRoleBindings().Informer().GetIndexer(), &b)
	}
	for _, r := range policy.Roles() {
		add(t, v1.Roles().Informer().GetIndexer(), &r)
	}
	for _, b := range policy.RoleBindings() {
		add(t, v1.RoleBindings().Informer().GetIndexer(), &b)
	}
	return rbac.New(rbac.Listers{Roles: v1.Roles().Lister(), ClusterRoles: v1.ClusterRoles().Lister(),
		RoleBindings: v1.RoleBindings().Lister(), ClusterRoleBindings: v1.ClusterRoleBindings().Lister()})
}

func add(t *testing.T, store interface{ Add(any) error }, obj any) {
	t.Helper()
	if err := store.Add(obj); err != nil {
		t.Fatal(err)
	}
}

// call is one request a component makes.
type call struct {
	verb, group, resource, subresource, namespace, name string
}

func (c call) attrs(u user.Info) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: c.verb, APIGroup: c.group, Resource: c.resource,
		Subresource: c.subresource, Namespace: c.namespace, Name: c.name, ResourceRequest: true}
}

// informer is what a component's informer of resource needs.
func informer(group, resource string) []call {
	return []call{{verb: "list", group: group, resource: resource}, {verb: "watch", group: group, resource: resource}}
}

func TestComponentRoles(t *testing.T) {
	a := bootstrapAuthorizer(t)
	authenticated := []string{user.AllAuthenticated}
	for _, tc := range []struct {
		name    string
		user    user.Info
		allowed [][]call
		denied  []call
	}{
		{"proxy", &user.DefaultInfo{Name: policy.ProxyUser, Groups: authenticated},
			[][]call{informer("", "services"), informer("discovery.k8s.io", "endpointslices"), informer("", "nodes"),
				{{verb: "get", resource: "nodes", name: "n1"}, {verb: "create", resource: "events", namespace: "default"}}},
			[]call{{verb: "get", resource: "secrets", namespace: "a", name: "s"}, {verb: "delete", resource: "namespaces", name: "a"},
				{verb: "create", resource: "services", namespace: "a"}, {verb: "update", resource: "nodes", subresource: "status", name: "n1"}}},
		{"dns", &user.DefaultInfo{Name: policy.DNSUser, Groups: authenticated},
			[][]call{informer("", "services"), informer("", "pods"), informer("", "namespaces"), informer("discovery.k8s.io", "endpointslices"),
				{{verb: "get", resource: "services", namespace: "kube-system", name: "kube-dns"},
					{verb: "update", resource: "services", namespace: "kube-system", name: "kube-dns"},
					{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", namespace: "kube-system"},
					{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "x"}}},
			[]call{{verb: "get", resource: "secrets", namespace: "kube-system", name: "s"},
				{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default"}}},
		{"ingress", &user.DefaultInfo{Name: policy.IngressUser, Groups: authenticated},
			[][]call{informer("networking.k8s.io", "ingresses"), informer("networking.k8s.io", "ingressclasses"), informer("", "services"),
				informer("", "secrets"), informer("", "nodes"), informer("discovery.k8s.io", "endpointslices"),
				{{verb: "update", group: "networking.k8s.io", resource: "ingresses", subresource: "status", namespace: "a", name: "i"},
					{verb: "create", resource: "events", namespace: "a"},
					{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
					{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: policy.IngressLeaderLease},
					{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: policy.IngressLeaderLease}}},
			[]call{{verb: "update", group: "networking.k8s.io", resource: "ingresses", namespace: "a", name: "i"},
				{verb: "create", resource: "secrets", namespace: "a"},
				{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "portal-controller-manager"},
				{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "portal-apiserver-0123456789ab"},
				{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "kube-dns-a"}}},
		{"controller manager", &user.DefaultInfo{Name: policy.ControllerManagerUser, Groups: authenticated},
			[][]call{informer("", "pods"), informer("apps", "deployments"), informer("rbac.authorization.k8s.io", "clusterroles"),
				{{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
					{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "portal-controller-manager"},
					{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", namespace: "a"},
					{verb: "create", resource: "endpoints", namespace: "a"},
					{verb: "create", resource: "serviceaccounts", namespace: "a"},
					{verb: "update", resource: "configmaps", namespace: "a", name: "kube-root-ca.crt"},
					{verb: "create", resource: "pods", namespace: "a"},
					{verb: "create", resource: "pods", subresource: "binding", namespace: "a", name: "p"},
					{verb: "update", resource: "pods", subresource: "status", namespace: "a", name: "p"},
					{verb: "update", resource: "services", subresource: "status", namespace: "a", name: "s"},
					{verb: "patch", resource: "nodes", name: "n1"},
					{verb: "update", resource: "nodes", subresource: "status", name: "n1"},
					{verb: "create", group: "apps", resource: "replicasets", namespace: "a"},
					{verb: "create", group: "apps", resource: "controllerrevisions", namespace: "a"},
					{verb: "update", group: "apps", resource: "deployments", subresource: "status", namespace: "a", name: "d"},
					{verb: "delete", group: "apps", resource: "replicasets", namespace: "a", name: "r"},
					{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "admin"},
					{verb: "update", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "admin"}}},
			[]call{{verb: "create", resource: "secrets", namespace: "a"}, {verb: "create", resource: "namespaces"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, group := range tc.allowed {
				for _, c := range group {
					if d, reason, _ := a.Authorize(context.Background(), c.attrs(tc.user)); d != authorizer.DecisionAllow {
						t.Errorf("%+v: got %v (%s), want allowed", c, d, reason)
					}
				}
			}
			for _, c := range tc.denied {
				if d, _, _ := a.Authorize(context.Background(), c.attrs(tc.user)); d == authorizer.DecisionAllow {
					t.Errorf("%+v: got allowed, want denied", c)
				}
			}
		})
	}
}

func TestAggregatedRolesNest(t *testing.T) {
	a := bootstrapAuthorizer(t)
	r := a.Resolver()
	for _, tc := range []struct{ outer, inner string }{{"admin", "edit"}, {"edit", "view"}} {
		outer, err := r.RoleRefRules(rbacv1.RoleRef{Kind: "ClusterRole", Name: tc.outer}, "")
		if err != nil {
			t.Fatal(err)
		}
		inner, _ := r.RoleRefRules(rbacv1.RoleRef{Kind: "ClusterRole", Name: tc.inner}, "")
		if len(inner) == 0 {
			t.Fatalf("%s has no rules", tc.inner)
		}
		for _, want := range inner {
			found := false
			for _, have := range outer {
				found = found || equal(have, want)
			}
			if !found {
				t.Errorf("%s lacks %s's rule %+v", tc.outer, tc.inner, want)
			}
		}
	}
}

func equal(a, b rbacv1.PolicyRule) bool {
	return a.String() == b.String()
}

// TestIssuerDiscovery: ServiceAccounts may read the OIDC documents, and
// anonymous users may not, as upstream's bootstrap policy says.
func TestIssuerDiscovery(t *testing.T) {
	a := bootstrapAuthorizer(t)
	sa := &user.DefaultInfo{Name: "system:serviceaccount:a:default",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:a", user.AllAuthenticated}}
	anonymous := &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	for _, path := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
		for _, tc := range []struct {
			who  user.Info
			want authorizer.Decision
		}{{sa, authorizer.DecisionAllow}, {anonymous, authorizer.DecisionNoOpinion}} {
			attrs := authorizer.AttributesRecord{User: tc.who, Verb: "get", Path: path}
			if d, reason, _ := a.Authorize(context.Background(), attrs); d != tc.want {
				t.Errorf("%s GET %s: got %v (%s), want %v", tc.who.GetName(), path, d, reason, tc.want)
			}
		}
	}
}
