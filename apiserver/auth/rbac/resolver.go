// Package rbac is Portal's RBAC authorizer: it decides a request from the
// Roles, ClusterRoles and their bindings, with upstream Kubernetes' RBAC
// semantics, reading them from informer caches only (never from etcd per
// request). It also resolves the rules a user holds, for the escalation
// check on role and binding writes and for SelfSubjectRulesReview. It owns
// no objects; the bootstrap policy lives in package policy.
package rbac

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// Listers are the caches rules are resolved from.
type Listers struct {
	Roles               rbaclisters.RoleLister
	ClusterRoles        rbaclisters.ClusterRoleLister
	RoleBindings        rbaclisters.RoleBindingLister
	ClusterRoleBindings rbaclisters.ClusterRoleBindingLister
	// ClusterRoleBindingIndex, when set, is the ClusterRoleBindings'
	// informer indexer with SubjectIndex added (see IndexBySubject).
	ClusterRoleBindingIndex cache.Indexer
}

// Resolver finds the rules a user holds.
type Resolver struct {
	l Listers
}

// NewResolver returns a Resolver over l.
func NewResolver(l Listers) *Resolver { return &Resolver{l: l} }

// visitor sees each rule that applies to a user; err reports a binding
// whose role could not be read. It returns false to stop the walk.
type visitor func(rule *rbacv1.PolicyRule, err error) bool

// visitRulesFor walks the rules u holds in namespace: those of every
// ClusterRoleBinding naming u, then, when namespace is set, those of the
// RoleBindings in it naming u. A namespace of "" means cluster-wide.
func (r *Resolver) visitRulesFor(u user.Info, namespace string, visit visitor) {
	crbs, err := r.clusterBindingsFor(u)
	if err != nil && !visit(nil, err) {
		return
	}
	for _, b := range crbs {
		if !appliesTo(u, b.Subjects, "") {
			continue
		}
		if !r.visitRoleRef(b.RoleRef, "", visit) {
			return
		}
	}
	if namespace == "" {
		return
	}
	rbs, err := r.l.RoleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil && !visit(nil, err) {
		return
	}
	for _, b := range rbs {
		if !appliesTo(u, b.Subjects, namespace) {
			continue
		}
		if !r.visitRoleRef(b.RoleRef, namespace, visit) {
			return
		}
	}
}

func (r *Resolver) visitRoleRef(ref rbacv1.RoleRef, namespace string, visit visitor) bool {
	rules, err := r.RoleRefRules(ref, namespace)
	if err != nil {
		return visit(nil, err)
	}
	for i := range rules {
		if !visit(&rules[i], nil) {
			return false
		}
	}
	return true
}

// RoleRefRules returns the rules of the role a binding in namespace refers
// to: a Role of that namespace or a ClusterRole. A missing role is an error
// (and grants nothing).
func (r *Resolver) RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		role, err := r.l.Roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	case "ClusterRole":
		role, err := r.l.ClusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// RulesFor returns every rule u holds in namespace, and an aggregate of
// the errors met on the way (the rules are then a lower bound).
func (r *Resolver) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	r.visitRulesFor(u, namespace, func(rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// appliesTo reports whether one of subjects names u. A ServiceAccount
// subject without a namespace means the binding's own.
func appliesTo(u user.Info, subjects []rbacv1.Subject, bindingNamespace string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if u.GetName() == s.Name {
				return true
			}
		case rbacv1.GroupKind:
			for _, g := range u.GetGroups() {
				if g == s.Name {
					return true
				}
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNamespace
			}
			if ns != "" && serviceaccount.MakeUsername(ns, s.Name) == u.GetName() {
				return true
			}
		}
	}
	return false
}
