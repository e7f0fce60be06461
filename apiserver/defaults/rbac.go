package defaults

import rbacv1 "k8s.io/api/rbac/v1"

// RoleBinding applies upstream's RoleBinding defaults: the roleRef and the
// User and Group subjects belong to rbac.authorization.k8s.io unless the
// client named a group.
func RoleBinding(b *rbacv1.RoleBinding) {
	roleRef(&b.RoleRef)
	subjects(b.Subjects)
}

// ClusterRoleBinding applies the same defaults as RoleBinding.
func ClusterRoleBinding(b *rbacv1.ClusterRoleBinding) {
	roleRef(&b.RoleRef)
	subjects(b.Subjects)
}

func roleRef(r *rbacv1.RoleRef) {
	if r.APIGroup == "" {
		r.APIGroup = rbacv1.GroupName
	}
}

// subjects defaults each subject's apiGroup from its kind; a ServiceAccount
// is in the core group, whose name is empty.
func subjects(subs []rbacv1.Subject) {
	for i := range subs {
		s := &subs[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}
