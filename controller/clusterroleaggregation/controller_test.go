package clusterroleaggregation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAggregate(t *testing.T) {
	get := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	del := rbacv1.PolicyRule{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	role := func(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
	}
	edit := role("edit", nil, del) // rules it had are replaced
	edit.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{"agg-edit": "true"}}, {MatchLabels: map[string]string{"agg-view": "true"}}}}
	all := []*rbacv1.ClusterRole{
		edit,
		role("z-view", map[string]string{"agg-view": "true"}, get),
		role("a-edit", map[string]string{"agg-edit": "true"}, del, get),
		role("unlabelled", nil, rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}),
	}
	got, err := Aggregate(edit, all)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rbacv1.PolicyRule{del, get}, got); diff != "" {
		t.Fatalf("rules (-want +got):\n%s", diff)
	}
}
