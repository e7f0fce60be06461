package policy

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// Reconcile puts the bootstrap policy in place through client: it creates
// what is missing and adds missing rules, aggregation selectors and
// subjects to existing objects annotated autoupdate "true", as upstream's
// rbac/bootstrap-roles hook does. Nothing is ever removed. It returns every
// object's error, joined.
func Reconcile(ctx context.Context, client kubernetes.Interface, nodeRules []rbacv1.PolicyRule) error {
	c := clusterRoles{ctx, client}
	var errs []error
	for _, r := range ClusterRoles(nodeRules) {
		opts := reconciliation.ReconcileRoleOptions{Confirm: true,
			Role:   reconciliation.ClusterRoleRuleOwner{ClusterRole: &r},
			Client: c}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("clusterrole %s: %w", r.Name, err))
		}
	}
	for _, b := range ClusterRoleBindings() {
		opts := reconciliation.ReconcileRoleBindingOptions{Confirm: true,
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &b},
			Client:      clusterRoleBindings(c)}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("clusterrolebinding %s: %w", b.Name, err))
		}
	}
	for _, r := range Roles() {
		opts := reconciliation.ReconcileRoleOptions{Confirm: true,
			Role:   reconciliation.RoleRuleOwner{Role: &r},
			Client: roles(c)}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("role %s/%s: %w", r.Namespace, r.Name, err))
		}
	}
	for _, b := range RoleBindings() {
		opts := reconciliation.ReconcileRoleBindingOptions{Confirm: true,
			RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: &b},
			Client:      roleBindings(c)}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("rolebinding %s/%s: %w", b.Namespace, b.Name, err))
		}
	}
	return errors.Join(errs...)
}
