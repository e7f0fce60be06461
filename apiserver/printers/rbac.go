package printers

import (
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Roles print as NAME and CREATED AT, the timestamp in RFC 3339, as
// upstream's printers do for these two kinds (not AGE).
var createdAtColumn = metav1.TableColumnDefinition{Name: "Created At", Type: "date", Description: objectMetaDoc["creationTimestamp"]}

var rolePrinter = printer[*rbacv1.Role]{
	columns: []metav1.TableColumnDefinition{nameColumn, createdAtColumn},
	cells: func(r *rbacv1.Role) []any {
		return []any{r.Name, r.CreationTimestamp.UTC().Format(time.RFC3339)}
	},
}

var clusterRolePrinter = printer[*rbacv1.ClusterRole]{
	columns: []metav1.TableColumnDefinition{nameColumn, createdAtColumn},
	cells: func(r *rbacv1.ClusterRole) []any {
		return []any{r.Name, r.CreationTimestamp.UTC().Format(time.RFC3339)}
	},
}

// bindingColumns are those of both binding kinds: the role as KIND/NAME,
// and, wide, the subjects split by kind.
var bindingColumns = []metav1.TableColumnDefinition{
	nameColumn,
	column("Role", "string", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
	ageColumn,
	wideColumn("Users", "string", "Users in the roleBinding"),
	wideColumn("Groups", "string", "Groups in the roleBinding"),
	wideColumn("ServiceAccounts", "string", "ServiceAccounts in the roleBinding"),
}

var roleBindingPrinter = printer[*rbacv1.RoleBinding]{
	columns: bindingColumns,
	cells: func(b *rbacv1.RoleBinding) []any {
		return bindingCells(b.ObjectMeta, b.RoleRef, b.Subjects)
	},
}

var clusterRoleBindingPrinter = printer[*rbacv1.ClusterRoleBinding]{
	columns: bindingColumns,
	cells: func(b *rbacv1.ClusterRoleBinding) []any {
		return bindingCells(b.ObjectMeta, b.RoleRef, b.Subjects)
	},
}

func bindingCells(m metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject) []any {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []any{m.Name, ref.Kind + "/" + ref.Name, age(m.CreationTimestamp),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}
