package validation

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateRBAC(t *testing.T) {
	ns := metav1.ObjectMeta{Name: "r", Namespace: "a"}
	cluster := metav1.ObjectMeta{Name: "system:r"}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}
	user := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "bob"}
	for _, tc := range []struct {
		name      string
		errs      func() []string
		wantField string // empty: valid
	}{
		{"role with an unknown verb is valid, as upstream", func() []string {
			return fields(ValidateRole(&rbacv1.Role{ObjectMeta: ns, Rules: []rbacv1.PolicyRule{{Verbs: []string{"frobnicate"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}))
		}, ""},
		{"rule without verbs", func() []string {
			return fields(ValidateRole(&rbacv1.Role{ObjectMeta: ns, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}}))
		}, "rules[0].verbs"},
		{"rule without apiGroups", func() []string {
			return fields(ValidateRole(&rbacv1.Role{ObjectMeta: ns, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}}))
		}, "rules[0].apiGroups"},
		{"namespaced role with a non-resource URL", func() []string {
			return fields(ValidateRole(&rbacv1.Role{ObjectMeta: ns, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}))
		}, "rules[0].nonResourceURLs"},
		{"cluster role with a colon in its name and a URL rule", func() []string {
			return fields(ValidateClusterRole(&rbacv1.ClusterRole{ObjectMeta: cluster, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/*"}}}}))
		}, ""},
		{"aggregation rule without selectors", func() []string {
			return fields(ValidateClusterRole(&rbacv1.ClusterRole{ObjectMeta: cluster, AggregationRule: &rbacv1.AggregationRule{}}))
		}, "aggregationRule.clusterRoleSelectors"},
		{"binding to a kind that is not a role", func() []string {
			r := ref
			r.Kind = "Secret"
			return fields(ValidateRoleBinding(&rbacv1.RoleBinding{ObjectMeta: ns, RoleRef: r}))
		}, "roleRef.kind"},
		{"cluster binding to a Role", func() []string {
			return fields(ValidateClusterRoleBinding(&rbacv1.ClusterRoleBinding{ObjectMeta: cluster, RoleRef: ref}))
		}, "roleRef.kind"},
		{"binding in another API group", func() []string {
			r := ref
			r.APIGroup = "example.com"
			return fields(ValidateRoleBinding(&rbacv1.RoleBinding{ObjectMeta: ns, RoleRef: r}))
		}, "roleRef.apiGroup"},
		{"subject of an unknown kind", func() []string {
			return fields(ValidateRoleBinding(&rbacv1.RoleBinding{ObjectMeta: ns, RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: "Robot", Name: "x"}}}))
		}, "subjects[0].kind"},
		{"cluster binding to a ServiceAccount without namespace", func() []string {
			r := ref
			r.Kind = "ClusterRole"
			return fields(ValidateClusterRoleBinding(&rbacv1.ClusterRoleBinding{ObjectMeta: cluster, RoleRef: r, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default"}}}))
		}, "subjects[0].namespace"},
		{"roleRef changed on update", func() []string {
			old := &rbacv1.RoleBinding{ObjectMeta: ns, RoleRef: ref, Subjects: []rbacv1.Subject{user}}
			old.ResourceVersion = "1"
			nb := old.DeepCopy()
			nb.RoleRef.Name = "other"
			return fields(ValidateRoleBindingUpdate(nb, old))
		}, "roleRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.errs()
			if tc.wantField == "" {
				if len(got) != 0 {
					t.Fatalf("got errors on %v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0] != tc.wantField {
				t.Fatalf("got errors on %v, want one on %s", got, tc.wantField)
			}
		})
	}
}

// fields returns the field paths errs are about.
func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}
