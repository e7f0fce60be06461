package policy

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// The reconciliation package's own modifiers send every request with
// context.TODO, so a reconcile (and client-go's waits between its retries)
// would outlive the server that asked for it. These send theirs with ctx.

type clusterRoles struct {
	ctx    context.Context
	client kubernetes.Interface
}

func (c clusterRoles) Get(_, name string) (reconciliation.RuleOwner, error) {
	r, err := c.client.RbacV1().ClusterRoles().Get(c.ctx, name, metav1.GetOptions{})
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: r}, err
}

func (c clusterRoles) Create(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	r, err := c.client.RbacV1().ClusterRoles().Create(c.ctx, in.(reconciliation.ClusterRoleRuleOwner).ClusterRole, metav1.CreateOptions{})
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: r}, err
}

func (c clusterRoles) Update(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	r, err := c.client.RbacV1().ClusterRoles().Update(c.ctx, in.(reconciliation.ClusterRoleRuleOwner).ClusterRole, metav1.UpdateOptions{})
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: r}, err
}

type roles clusterRoles

func (c roles) Get(namespace, name string) (reconciliation.RuleOwner, error) {
	r, err := c.client.RbacV1().Roles(namespace).Get(c.ctx, name, metav1.GetOptions{})
	return reconciliation.RoleRuleOwner{Role: r}, err
}

func (c roles) Create(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	if err := ensureNamespace(c.ctx, c.client, in.GetNamespace()); err != nil {
		return nil, err
	}
	r, err := c.client.RbacV1().Roles(in.GetNamespace()).Create(c.ctx, in.(reconciliation.RoleRuleOwner).Role, metav1.CreateOptions{})
	return reconciliation.RoleRuleOwner{Role: r}, err
}

func (c roles) Update(in reconciliation.RuleOwner) (reconciliation.RuleOwner, error) {
	r, err := c.client.RbacV1().Roles(in.GetNamespace()).Update(c.ctx, in.(reconciliation.RoleRuleOwner).Role, metav1.UpdateOptions{})
	return reconciliation.RoleRuleOwner{Role: r}, err
}

type clusterRoleBindings clusterRoles

func (c clusterRoleBindings) Get(_, name string) (reconciliation.RoleBinding, error) {
	b, err := c.client.RbacV1().ClusterRoleBindings().Get(c.ctx, name, metav1.GetOptions{})
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b}, err
}

func (c clusterRoleBindings) Create(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	b, err := c.client.RbacV1().ClusterRoleBindings().Create(c.ctx, in.(reconciliation.ClusterRoleBindingAdapter).ClusterRoleBinding, metav1.CreateOptions{})
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b}, err
}

func (c clusterRoleBindings) Update(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	b, err := c.client.RbacV1().ClusterRoleBindings().Update(c.ctx, in.(reconciliation.ClusterRoleBindingAdapter).ClusterRoleBinding, metav1.UpdateOptions{})
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b}, err
}

func (c clusterRoleBindings) Delete(_, name string, uid types.UID) error {
	return c.client.RbacV1().ClusterRoleBindings().Delete(c.ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

type roleBindings clusterRoles

func (c roleBindings) Get(namespace, name string) (reconciliation.RoleBinding, error) {
	b, err := c.client.RbacV1().RoleBindings(namespace).Get(c.ctx, name, metav1.GetOptions{})
	return reconciliation.RoleBindingAdapter{RoleBinding: b}, err
}

func (c roleBindings) Create(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	if err := ensureNamespace(c.ctx, c.client, in.GetNamespace()); err != nil {
		return nil, err
	}
	b, err := c.client.RbacV1().RoleBindings(in.GetNamespace()).Create(c.ctx, in.(reconciliation.RoleBindingAdapter).RoleBinding, metav1.CreateOptions{})
	return reconciliation.RoleBindingAdapter{RoleBinding: b}, err
}

func (c roleBindings) Update(in reconciliation.RoleBinding) (reconciliation.RoleBinding, error) {
	b, err := c.client.RbacV1().RoleBindings(in.GetNamespace()).Update(c.ctx, in.(reconciliation.RoleBindingAdapter).RoleBinding, metav1.UpdateOptions{})
	return reconciliation.RoleBindingAdapter{RoleBinding: b}, err
}

func (c roleBindings) Delete(namespace, name string, uid types.UID) error {
	return c.client.RbacV1().RoleBindings(namespace).Delete(c.ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// ensureNamespace creates namespace if it is missing, so that a Role of
// the policy can be put in it.
func ensureNamespace(ctx context.Context, client kubernetes.Interface, namespace string) error {
	_, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
