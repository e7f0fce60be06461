package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateRBACName is upstream's rule for the names of roles and bindings:
// any string usable as one path segment, so that names like
// "system:kube-proxy" are allowed.
func validateRBACName(name string, prefix bool) []string {
	return path.IsValidPathSegmentName(name)
}

// ValidateRole validates a Role.
func ValidateRole(role *rbacv1.Role) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&role.ObjectMeta, true, validateRBACName, field.NewPath("metadata"))
	return append(errs, validatePolicyRules(role.Rules, true)...)
}

// ValidateRoleUpdate validates an update of a Role.
func ValidateRoleUpdate(role, old *rbacv1.Role) field.ErrorList {
	errs := ValidateRole(role)
	return append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(&role.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))...)
}

// ValidateClusterRole validates a ClusterRole: its rules and, when set,
// its aggregationRule, which needs at least one valid label selector.
func ValidateClusterRole(role *rbacv1.ClusterRole) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&role.ObjectMeta, false, validateRBACName, field.NewPath("metadata"))
	errs = append(errs, validatePolicyRules(role.Rules, false)...)
	if role.AggregationRule == nil {
		return errs
	}
	selPath := field.NewPath("aggregationRule", "clusterRoleSelectors")
	if len(role.AggregationRule.ClusterRoleSelectors) == 0 {
		errs = append(errs, field.Required(selPath, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
	}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel := &role.AggregationRule.ClusterRoleSelectors[i]
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, selPath.Index(i))...)
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(selPath.Index(i), sel, "invalid label selector."))
		}
	}
	return errs
}

// ValidateClusterRoleUpdate validates an update of a ClusterRole.
func ValidateClusterRoleUpdate(role, old *rbacv1.ClusterRole) field.ErrorList {
	errs := ValidateClusterRole(role)
	return append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(&role.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))...)
}

// validatePolicyRules checks each rule as upstream does: verbs are
// required (any verb string is accepted, as upstream: authorizers and
// webhooks define their own), a rule is either about resources (with
// apiGroups and resources) or about non-resource URLs, and namespaced
// roles cannot hold non-resource URLs.
func validatePolicyRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		p := field.NewPath("rules").Index(i)
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(rule.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

// ValidateRoleBinding validates a RoleBinding. It may refer to a Role (in
// its own namespace: roleRef has no namespace, so another namespace's Role
// cannot be named) or to a ClusterRole.
func ValidateRoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&b.ObjectMeta, true, validateRBACName, field.NewPath("metadata"))
	errs = append(errs, validateRoleRef(b.RoleRef, []string{"Role", "ClusterRole"})...)
	return append(errs, validateSubjects(b.Subjects, true)...)
}

// ValidateRoleBindingUpdate validates an update of a RoleBinding; its
// roleRef cannot change, as upstream: delete and recreate the binding.
func ValidateRoleBindingUpdate(b, old *rbacv1.RoleBinding) field.ErrorList {
	errs := ValidateRoleBinding(b)
	errs = append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))...)
	if b.RoleRef != old.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

// ValidateClusterRoleBinding validates a ClusterRoleBinding, which may only
// refer to a ClusterRole.
func ValidateClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&b.ObjectMeta, false, validateRBACName, field.NewPath("metadata"))
	errs = append(errs, validateRoleRef(b.RoleRef, []string{"ClusterRole"})...)
	return append(errs, validateSubjects(b.Subjects, false)...)
}

// ValidateClusterRoleBindingUpdate validates an update of a
// ClusterRoleBinding; its roleRef cannot change.
func ValidateClusterRoleBindingUpdate(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := ValidateClusterRoleBinding(b)
	errs = append(errs, apimachineryvalidation.ValidateObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))...)
	if b.RoleRef != old.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

func validateRoleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	known := false
	for _, k := range kinds {
		known = known || ref.Kind == k
	}
	if !known {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		return append(errs, field.Required(p.Child("name"), ""))
	}
	for _, msg := range validateRBACName(ref.Name, false) {
		errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
	}
	return errs
}

// validateSubjects checks each subject's kind and apiGroup; a
// ServiceAccount needs a valid name and, in a cluster-wide binding, a
// namespace (in a RoleBinding it defaults to the binding's).
func validateSubjects(subs []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, s := range subs {
		p := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				for _, msg := range apimachineryvalidation.ValidateServiceAccountName(s.Name, false) {
					errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
				}
			}
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}
