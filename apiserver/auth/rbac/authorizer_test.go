package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// listersOf fills informer caches with objs, without a server.
func listersOf(t *testing.T, objs ...runtime.Object) Listers {
	t.Helper()
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	v1 := f.Rbac().V1()
	crbs := v1.ClusterRoleBindings().Informer()
	if err := crbs.AddIndexers(cache.Indexers{SubjectIndex: IndexBySubject}); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *rbacv1.Role:
			err = v1.Roles().Informer().GetIndexer().Add(o)
		case *rbacv1.ClusterRole:
			err = v1.ClusterRoles().Informer().GetIndexer().Add(o)
		case *rbacv1.RoleBinding:
			err = v1.RoleBindings().Informer().GetIndexer().Add(o)
		case *rbacv1.ClusterRoleBinding:
			err = v1.ClusterRoleBindings().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return Listers{Roles: v1.Roles().Lister(), ClusterRoles: v1.ClusterRoles().Lister(),
		RoleBindings: v1.RoleBindings().Lister(), ClusterRoleBindings: v1.ClusterRoleBindings().Lister(),
		ClusterRoleBindingIndex: crbs.GetIndexer()}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func roleBinding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName},
		Subjects: subjects}
}

func clusterBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects: subjects}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func rule(verbs, groups, resources []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func list(s ...string) []string { return s }

func TestAuthorize(t *testing.T) {
	l := listersOf(t,
		clusterRole("reader", rule(list("get", "list", "watch"), list(""), list("services", "pods/log"))),
		clusterRole("status-writer", rule(list("update"), list("*"), list("*/status"))),
		clusterRole("one-secret", rbacv1.PolicyRule{Verbs: list("get"), APIGroups: list(""), Resources: list("secrets"), ResourceNames: list("tls")}),
		clusterRole("health", rbacv1.PolicyRule{Verbs: list("get"), NonResourceURLs: list("/healthz", "/readyz/*")}),
		clusterRole("all", rule(list("*"), list("*"), list("*"))),
		role("a", "lease-writer", rule(list("update"), list("coordination.k8s.io"), list("leases"))),
		clusterBinding("alice-reader", "reader", userSubject("alice")),
		clusterBinding("ops-status", "status-writer", groupSubject("ops")),
		clusterBinding("health", "health", groupSubject(user.AllAuthenticated)),
		clusterBinding("dangling", "missing", userSubject("carol")),
		clusterBinding("sa-reader", "reader", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "watcher"}),
		roleBinding("a", "bob-secret", "ClusterRole", "one-secret", userSubject("bob")),
		roleBinding("a", "bob-leases", "Role", "lease-writer", userSubject("bob")),
		roleBinding("a", "sa-all", "ClusterRole", "all", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot"}),
	)
	alice := &user.DefaultInfo{Name: "alice", Groups: list(user.AllAuthenticated)}
	bob := &user.DefaultInfo{Name: "bob", Groups: list(user.AllAuthenticated, "ops")}
	carol := &user.DefaultInfo{Name: "carol"}
	robot := &user.DefaultInfo{Name: "system:serviceaccount:a:robot", Groups: list("system:serviceaccounts", "system:serviceaccounts:a")}
	res := func(u user.Info, verb, ns, resource, sub, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: ns, Resource: resource, Subresource: sub, Name: name, ResourceRequest: true}
	}
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
	}{
		{"cluster binding grants in every namespace", res(alice, "list", "b", "services", "", ""), authorizer.DecisionAllow},
		{"verb not granted", res(alice, "delete", "b", "services", "", "x"), authorizer.DecisionNoOpinion},
		{"subresource named", res(alice, "get", "a", "pods", "log", "p"), authorizer.DecisionAllow},
		{"resource rule does not cover its subresource", res(alice, "get", "a", "services", "status", "s"), authorizer.DecisionNoOpinion},
		{"*/status covers every status", res(bob, "update", "a", "services", "status", "s"), authorizer.DecisionAllow},
		{"resourceNames allow the name", res(bob, "get", "a", "secrets", "", "tls"), authorizer.DecisionAllow},
		{"resourceNames refuse another name", res(bob, "get", "a", "secrets", "", "db"), authorizer.DecisionNoOpinion},
		{"resourceNames refuse a list", res(bob, "list", "a", "secrets", "", ""), authorizer.DecisionNoOpinion},
		{"role binding only in its namespace", res(bob, "get", "b", "secrets", "", "tls"), authorizer.DecisionNoOpinion},
		{"rule of another API group", res(bob, "update", "a", "leases", "", "l"), authorizer.DecisionNoOpinion},
		{"service account subject defaults to the binding's namespace", res(robot, "delete", "a", "pods", "", "p"), authorizer.DecisionAllow},
		{"cluster binding of a service account", res(&user.DefaultInfo{Name: "system:serviceaccount:kube-system:watcher"}, "list", "b", "services", "", ""), authorizer.DecisionAllow},
		{"service account only in that namespace", res(robot, "delete", "b", "pods", "", "p"), authorizer.DecisionNoOpinion},
		{"binding to a missing role grants nothing", res(carol, "get", "a", "pods", "", "p"), authorizer.DecisionNoOpinion},
		{"non-resource URL", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/healthz"}, authorizer.DecisionAllow},
		{"non-resource URL prefix", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/readyz/etcd"}, authorizer.DecisionAllow},
		{"non-resource URL not listed", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/metrics"}, authorizer.DecisionNoOpinion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The subject index must decide as walking every binding does.
			unindexed := l
			unindexed.ClusterRoleBindingIndex = nil
			for _, l := range []Listers{l, unindexed} {
				got, reason, err := New(l).Authorize(context.Background(), tc.attrs)
				if err != nil || got != tc.want {
					t.Fatalf("indexed %v: got %v (%q, %v), want %v", l.ClusterRoleBindingIndex != nil, got, reason, err, tc.want)
				}
			}
		})
	}
}

func TestAuthorizeRoleInBindingNamespace(t *testing.T) {
	// The lease-writer Role exists in namespace a only; bob's binding in a
	// names it, so a lease update in a is allowed.
	l := listersOf(t,
		role("a", "lease-writer", rule(list("update"), list("coordination.k8s.io"), list("leases"))),
		roleBinding("a", "bob-leases", "Role", "lease-writer", userSubject("bob")),
		roleBinding("b", "bob-leases", "Role", "lease-writer", userSubject("bob")),
	)
	bob := &user.DefaultInfo{Name: "bob"}
	for ns, want := range map[string]authorizer.Decision{"a": authorizer.DecisionAllow, "b": authorizer.DecisionNoOpinion} {
		got, reason, _ := New(l).Authorize(context.Background(), authorizer.AttributesRecord{
			User: bob, Verb: "update", Namespace: ns, APIGroup: "coordination.k8s.io", Resource: "leases", Name: "l", ResourceRequest: true})
		if got != want {
			t.Errorf("namespace %s: got %v, want %v", ns, got, want)
		}
		if ns == "b" && !strings.Contains(reason, `role.rbac.authorization.k8s.io "lease-writer" not found`) {
			t.Errorf("namespace b: got reason %q, want it to name the missing role", reason)
		}
	}
}

func TestConfirmNoEscalation(t *testing.T) {
	l := listersOf(t,
		role("a", "edit", rule(list("get", "list", "create"), list(""), list("pods", "services"))),
		roleBinding("a", "dave-edit", "Role", "edit", userSubject("dave")),
	)
	dave := &user.DefaultInfo{Name: "dave", Groups: list(user.AllAuthenticated)}
	r := NewResolver(l)
	if err := r.ConfirmNoEscalation(dave, "a", []rbacv1.PolicyRule{rule(list("get"), list(""), list("pods"))}); err != nil {
		t.Fatalf("held rule: got %v, want nil", err)
	}
	err := r.ConfirmNoEscalation(dave, "a", []rbacv1.PolicyRule{rule(list("get", "delete"), list(""), list("pods", "secrets"))})
	if err == nil {
		t.Fatal("rules not held: got nil, want an error")
	}
	want := `user "dave" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}
{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}`
	if err.Error() != want {
		t.Fatalf("got %q, want %q", err.Error(), want)
	}
}
