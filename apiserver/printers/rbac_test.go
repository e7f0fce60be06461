package printers

import (
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRBACRows(t *testing.T) {
	runRowCases(t, gr("rbac.authorization.k8s.io", "clusterroles"), []rowCase{{
		name: "roles print their creation time, not an age",
		obj:  &rbacv1.ClusterRole{ObjectMeta: objectMeta("view", time.Hour)},
		want: []any{"view", testNow.Add(-time.Hour).UTC().Format(time.RFC3339)},
	}})
	runRowCases(t, gr("rbac.authorization.k8s.io", "rolebindings"), []rowCase{{
		name: "subjects split by kind",
		obj: &rbacv1.RoleBinding{ObjectMeta: objectMeta("edit", time.Hour),
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "dave"}, {Kind: "User", Name: "erin"},
				{Kind: "Group", Name: "ops"}, {Kind: "ServiceAccount", Namespace: "a", Name: "robot"}}},
		want: []any{"edit", "ClusterRole/edit", "60m", "dave, erin", "ops", "a/robot"},
	}})
}
