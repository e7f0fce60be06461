package policy

import rbacv1 "k8s.io/api/rbac/v1"

// controller is one of the controller manager's controllers and what it
// calls.
type controller struct {
	name  string
	rules []rbacv1.PolicyRule
}

// controllers lists, as system:controller:NAME roles, the controllers
// Portal's controller manager runs (controller/manager/controllers.go),
// under upstream's names where upstream has the controller.
var controllers = []controller{
	{"endpointslice-controller", []rbacv1.PolicyRule{
		rule("get list watch", "core", "services pods nodes"),
		rule("update", "core", "services/finalizers"),
		rule("create delete get list update", "discovery.k8s.io", "endpointslices"),
		events}},
	{"endpoint-controller", []rbacv1.PolicyRule{
		rule("get list watch", "core", "services pods"),
		rule("create delete get list update", "core", "endpoints"),
		rule("create", "core", "endpoints/restricted"),
		events}},
	{"endpointslicemirroring-controller", []rbacv1.PolicyRule{
		rule("get list watch", "core", "services endpoints"),
		rule("update", "core", "services/finalizers endpoints/finalizers"),
		rule("create delete get list update", "discovery.k8s.io", "endpointslices"),
		events}},
	// The garbage collector follows and deletes dependents of every kind.
	{"generic-garbage-collector", []rbacv1.PolicyRule{
		rule("delete get list patch update watch", "*", "*")}},
	// servicelb gives LoadBalancer Services addresses from pools or nodes.
	{"service-lb-controller", []rbacv1.PolicyRule{
		rule("get list watch", "core", "services nodes"),
		rule("update patch", "core", "services/status"),
		events}},
	// nodelifecycle marks silent nodes and evicts their pods; nodeipam
	// gives nodes their podCIDRs.
	{"node-controller", []rbacv1.PolicyRule{
		rule("delete get list patch update watch", "core", "nodes"),
		rule("patch update", "core", "nodes/status"),
		rule("delete list watch get", "core", "pods"),
		rule("patch update", "core", "pods/status"),
		rule("get list watch", "coordination.k8s.io", "leases"),
		events}},
	{"pod-garbage-collector", []rbacv1.PolicyRule{
		rule("delete list watch", "core", "pods"),
		rule("get list watch", "core", "nodes"),
		rule("patch update", "core", "pods/status")}},
	{"replicaset-controller", []rbacv1.PolicyRule{
		rule("get list update watch", "apps", "replicasets"),
		rule("update", "apps", "replicasets/status replicasets/finalizers"),
		rule("create delete list patch watch", "core", "pods"),
		events}},
	{"daemon-set-controller", []rbacv1.PolicyRule{
		rule("get list watch", "apps", "daemonsets"),
		rule("update", "apps", "daemonsets/status daemonsets/finalizers"),
		rule("list watch", "core", "nodes"),
		rule("create delete list patch watch", "core", "pods"),
		rule("create", "core", "pods/binding"),
		rule("create delete get list patch update watch", "apps", "controllerrevisions"),
		events}},
	{"statefulset-controller", []rbacv1.PolicyRule{
		rule("list watch", "core", "pods"),
		rule("create delete get patch update", "core", "pods"),
		rule("list watch", "apps", "statefulsets"),
		rule("get", "apps", "statefulsets"),
		rule("update", "apps", "statefulsets/status statefulsets/finalizers"),
		rule("create delete get list patch update watch", "apps", "controllerrevisions"),
		rule("get create", "core", "persistentvolumeclaims"),
		events}},
	{"deployment-controller", []rbacv1.PolicyRule{
		rule("get list update watch", "apps", "deployments"),
		rule("update", "apps", "deployments/status deployments/finalizers"),
		rule("create delete get list patch update watch", "apps", "replicasets"),
		rule("get list watch update", "core", "pods"),
		events}},
	// Portal's scheduler runs in the controller manager and binds pods to
	// nodes, as kube-scheduler does.
	{"scheduler", []rbacv1.PolicyRule{
		rule("get list watch", "core", "pods nodes namespaces"),
		rule("create", "core", "pods/binding bindings"),
		rule("patch update", "core", "pods/status"),
		events}},
	// The serviceaccounts controller creates each namespace's default
	// account.
	{"service-account-controller", []rbacv1.PolicyRule{
		rule("create", "core", "serviceaccounts"),
		events}},
	// The root CA publisher keeps kube-root-ca.crt in every namespace.
	{"root-ca-cert-publisher", []rbacv1.PolicyRule{
		rule("create update", "core", "configmaps"),
		events}},
	// The aggregation controller fills admin, edit, view and any other
	// aggregated ClusterRole; it may write rules it does not hold.
	{"clusterrole-aggregation-controller", []rbacv1.PolicyRule{
		rule("escalate get list patch update watch", "rbac.authorization.k8s.io", "clusterroles")}},
}

// controllerRoles returns the per-controller roles and
// system:kube-controller-manager, which holds what the manager itself
// does: its leader-election Lease, Events, discovery of every resource for
// the garbage collector, and the shared informers' lists and watches.
func controllerRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{clusterRole(ControllerManagerUser,
		rule("create", "coordination.k8s.io", "leases"),
		named(rule("get update", "coordination.k8s.io", "leases"), "portal-controller-manager"),
		rule("list watch", "*", "*"),
		events,
	)}
	for _, c := range controllers {
		roles = append(roles, clusterRole("system:controller:"+c.name, c.rules...))
	}
	return roles
}
