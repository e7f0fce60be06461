package registry

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"portal.dev/portal/apiserver/validation"
)

// rbacKinds returns the rbac.authorization.k8s.io/v1 resources. None has
// status; what a user may write into them is checked against what the
// user holds (see Config.Escalation).
func rbacKinds(cfg Config) []Kind {
	rbac := rbacv1.SchemeGroupVersion
	return []Kind{
		{GroupVersion: rbac, Resource: "clusterrolebindings", Singular: "clusterrolebinding",
			Hooks:       typed(validation.ValidateClusterRoleBinding, validation.ValidateClusterRoleBindingUpdate),
			BeginCreate: cfg.Escalation.beginCreate(), BeginUpdate: cfg.Escalation.beginUpdate(),
			New:     func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
			NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} }},
		{GroupVersion: rbac, Resource: "clusterroles", Singular: "clusterrole",
			Hooks:       typed(validation.ValidateClusterRole, validation.ValidateClusterRoleUpdate),
			BeginCreate: cfg.Escalation.beginCreate(), BeginUpdate: cfg.Escalation.beginUpdate(),
			New:     func() runtime.Object { return &rbacv1.ClusterRole{} },
			NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} }},
		{GroupVersion: rbac, Resource: "rolebindings", Singular: "rolebinding", Namespaced: true,
			Hooks:       typed(validation.ValidateRoleBinding, validation.ValidateRoleBindingUpdate),
			BeginCreate: cfg.Escalation.beginCreate(), BeginUpdate: cfg.Escalation.beginUpdate(),
			New:     func() runtime.Object { return &rbacv1.RoleBinding{} },
			NewList: func() runtime.Object { return &rbacv1.RoleBindingList{} }},
		{GroupVersion: rbac, Resource: "roles", Singular: "role", Namespaced: true,
			Hooks:       typed(validation.ValidateRole, validation.ValidateRoleUpdate),
			BeginCreate: cfg.Escalation.beginCreate(), BeginUpdate: cfg.Escalation.beginUpdate(),
			New:     func() runtime.Object { return &rbacv1.Role{} },
			NewList: func() runtime.Object { return &rbacv1.RoleList{} }},
	}
}
