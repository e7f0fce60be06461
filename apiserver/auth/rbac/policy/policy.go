// Package policy is Portal's bootstrap RBAC policy: the ClusterRoles,
// Roles and bindings the API server keeps in place at start (see
// Reconcile), written for what each Portal component actually calls. It
// owns no other objects and never removes what an operator added.
package policy

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AutoUpdateAnnotation marks a bootstrap object that reconciliation may
// add missing rules or subjects to; set it to "false" to keep an edited
// object as it is, as upstream.
const AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"

// The aggregation labels: a ClusterRole carrying one of them has its rules
// copied into admin, edit or view.
const (
	AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// Component identities, as `portal server` and `portal kubeconfig` mint
// them.
const (
	ProxyUser             = "system:kube-proxy"
	DNSUser               = "system:kube-dns"
	ControllerManagerUser = "system:kube-controller-manager"
	IngressUser           = "system:portal-ingress"
)

// IngressLeaderLease is the kube-system Lease the Ingress controller's
// replicas of the default class campaign for, the only one its Role may
// read and renew.
const IngressLeaderLease = "portal-ingress-leader-portal"

// rule builds a resource rule from space-separated verbs, API groups
// ("" is the core group; write it as "core") and resources.
func rule(verbs, groups, resources string) rbacv1.PolicyRule {
	var gs []string
	for _, g := range strings.Fields(groups) {
		if g == "core" {
			g = ""
		}
		gs = append(gs, g)
	}
	return rbacv1.PolicyRule{Verbs: strings.Fields(verbs), APIGroups: gs, Resources: strings.Fields(resources)}
}

// named limits r to the objects called names.
func named(r rbacv1.PolicyRule, names ...string) rbacv1.PolicyRule {
	r.ResourceNames = names
	return r
}

// urls builds a non-resource rule.
func urls(verbs, paths string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: strings.Fields(verbs), NonResourceURLs: strings.Fields(paths)}
}

// events is what every component that records Events needs.
var events = rule("create patch update", "core events.k8s.io", "events")

func bootstrapMeta(name string, labels map[string]string) metav1.ObjectMeta {
	l := map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	for k, v := range labels {
		l[k] = v
	}
	return metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{AutoUpdateAnnotation: "true"}}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: bootstrapMeta(name, nil), Rules: rules}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func serviceAccount(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

// clusterBinding binds the ClusterRole of the same name to subjects.
func clusterBinding(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{ObjectMeta: bootstrapMeta(role, nil),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: subjects}
}
