package policy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterRoles returns the bootstrap ClusterRoles; nodeRules are those of
// system:node (package node owns them).
func ClusterRoles(nodeRules []rbacv1.PolicyRule) []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		clusterRole("cluster-admin", rule("*", "*", "*"), urls("*", "*")),
		clusterRole("system:discovery", urls("get",
			"/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* /readyz /version /version/")),
		clusterRole("system:basic-user",
			rule("create", "authentication.k8s.io", "selfsubjectreviews"),
			rule("create", "authorization.k8s.io", "selfsubjectaccessreviews selfsubjectrulesreviews")),
		clusterRole("system:public-info-viewer", urls("get", "/healthz /livez /readyz /version /version/")),
		// ServiceAccounts may read the OIDC documents that verify their
		// tokens, as upstream grants.
		clusterRole("system:service-account-issuer-discovery", urls("get",
			"/.well-known/openid-configuration /.well-known/openid-configuration/ /openid/v1/jwks /openid/v1/jwks/")),
		clusterRole("system:node", nodeRules...),
	}
	roles = append(roles, userFacingRoles()...)
	roles = append(roles, componentRoles()...)
	return append(roles, controllerRoles()...)
}

// userFacingRoles are admin, edit and view, aggregated from the
// system:aggregate-to-* pieces (and from any ClusterRole an operator
// labels), so that admin holds edit and edit holds view.
func userFacingRoles() []rbacv1.ClusterRole {
	aggregated := func(name, label string) rbacv1.ClusterRole {
		r := rbacv1.ClusterRole{ObjectMeta: bootstrapMeta(name, nil)}
		r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{label: "true"}}}}
		return r
	}
	piece := func(name string, labels []string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
		l := map[string]string{}
		for _, k := range labels {
			l[k] = "true"
		}
		return rbacv1.ClusterRole{ObjectMeta: bootstrapMeta(name, l), Rules: rules}
	}
	const read = "get list watch"
	const write = "create delete deletecollection patch update"
	return []rbacv1.ClusterRole{
		aggregated("admin", AggregateToAdmin),
		aggregated("edit", AggregateToEdit),
		aggregated("view", AggregateToView),
		piece("system:aggregate-to-admin", []string{AggregateToAdmin},
			rule(write+" "+read, "rbac.authorization.k8s.io", "roles rolebindings"),
			rule("create", "authorization.k8s.io", "localsubjectaccessreviews")),
		piece("system:aggregate-to-edit", []string{AggregateToAdmin, AggregateToEdit},
			rule(write, "core", "pods pods/attach pods/exec pods/portforward pods/proxy"),
			rule("create", "core", "pods/eviction"),
			rule(write, "core", "configmaps endpoints services services/proxy secrets serviceaccounts"),
			rule("create", "core", "serviceaccounts/token"),
			rule("impersonate", "core", "serviceaccounts"),
			// Read on the escalating subresources, as upstream: kubectl
			// opens exec, attach and port-forward WebSockets with GET.
			rule(read, "core", "pods/attach pods/exec pods/portforward pods/proxy secrets services/proxy"),
			rule(write, "apps", "daemonsets deployments deployments/rollback deployments/scale replicasets replicasets/scale statefulsets statefulsets/scale"),
			rule(write, "networking.k8s.io", "ingresses"),
			rule(write, "discovery.k8s.io", "endpointslices")),
		piece("system:aggregate-to-view", []string{AggregateToAdmin, AggregateToEdit, AggregateToView},
			rule(read, "core", "pods pods/log pods/status services services/status endpoints configmaps serviceaccounts events namespaces namespaces/status"),
			rule(read, "events.k8s.io", "events"),
			rule(read, "apps", "controllerrevisions daemonsets daemonsets/status deployments deployments/scale deployments/status replicasets replicasets/scale replicasets/status statefulsets statefulsets/scale statefulsets/status"),
			rule(read, "networking.k8s.io", "ingresses ingresses/status"),
			rule(read, "discovery.k8s.io", "endpointslices"),
			rule(read, "coordination.k8s.io", "leases")),
		// What metrics-server installs beside itself: kubectl top for
		// anyone who may view.
		piece("system:aggregated-metrics-reader", []string{AggregateToAdmin, AggregateToEdit, AggregateToView},
			rule(read, "metrics.k8s.io", "pods nodes")),
	}
}

// componentRoles grant Portal's node-side components and the Ingress
// controller what they call, and nothing more: the proxy reads no Secret,
// the Ingress controller reads them for TLS.
func componentRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		// The proxy watches Services, EndpointSlices and Nodes (its own,
		// for topology and health) and records Events.
		clusterRole("system:node-proxier",
			rule("list watch", "core", "services endpoints"),
			rule("get list watch", "core", "nodes"),
			rule("list watch", "discovery.k8s.io", "endpointslices"),
			events),
		// DNS answers from Services, EndpointSlices, Pods and Namespaces;
		// its publisher's writes are in the kube-system Role of the same
		// name (see Roles).
		clusterRole("system:kube-dns",
			rule("list watch", "core", "services endpoints pods namespaces"),
			rule("list watch", "discovery.k8s.io", "endpointslices"),
			events),
		// The Ingress controller routes from Ingresses of its class to
		// Services' EndpointSlices, serves TLS from Secrets, reads Nodes
		// and writes Ingress status.
		clusterRole("system:portal-ingress",
			rule("get list watch", "networking.k8s.io", "ingresses ingressclasses"),
			rule("update patch", "networking.k8s.io", "ingresses/status"),
			rule("get list watch", "core", "services secrets nodes"),
			rule("list watch", "discovery.k8s.io", "endpointslices"),
			events),
	}
}

// Roles returns the bootstrap Roles, all in kube-system.
func Roles() []rbacv1.Role {
	role := func(name string, rules ...rbacv1.PolicyRule) rbacv1.Role {
		m := bootstrapMeta(name, nil)
		m.Namespace = "kube-system"
		return rbacv1.Role{ObjectMeta: m, Rules: rules}
	}
	return []rbacv1.Role{
		// The DNS publisher keeps the kube-dns Service and one
		// EndpointSlice and Lease per DNS server in kube-system. The
		// Leases are named after each server's identity and a server
		// deletes those of dead ones, so they cannot be named here; the
		// PortalReservedLeases admission plugin keeps this role off the
		// API servers' and the controller manager's Leases.
		role("system:kube-dns",
			rule("get create update", "core", "services"),
			rule("get list create update delete", "discovery.k8s.io", "endpointslices"),
			rule("get create update delete", "coordination.k8s.io", "leases")),
		// The Ingress controller's replicas elect the one that writes
		// Ingress status through a Lease here, as ingress-nginx does in
		// its namespace: get and update only the default class's Lease
		// (another class or --election-id needs a Role naming its own).
		// Create cannot be limited by name; PortalReservedLeases keeps
		// it from forging the Leases that carry authority.
		role("system:portal-ingress",
			rule("create", "coordination.k8s.io", "leases"),
			named(rule("get update", "coordination.k8s.io", "leases"), IngressLeaderLease)),
	}
}

// RoleBindings returns the bindings of Roles.
func RoleBindings() []rbacv1.RoleBinding {
	binding := func(name string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		m := bootstrapMeta(name, nil)
		m.Namespace = "kube-system"
		return rbacv1.RoleBinding{ObjectMeta: m,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: subjects}
	}
	return []rbacv1.RoleBinding{
		binding("system:kube-dns", user(DNSUser), serviceAccount("kube-system", "kube-dns")),
		binding("system:portal-ingress", user(IngressUser)),
	}
}

// ClusterRoleBindings returns the bootstrap ClusterRoleBindings.
// system:node has none: the Node authorizer decides for agents.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	authenticated, unauthenticated := group("system:authenticated"), group("system:unauthenticated")
	bindings := []rbacv1.ClusterRoleBinding{
		clusterBinding("cluster-admin", group("system:masters")),
		clusterBinding("system:discovery", authenticated),
		clusterBinding("system:basic-user", authenticated),
		clusterBinding("system:public-info-viewer", authenticated, unauthenticated),
		clusterBinding("system:service-account-issuer-discovery", group("system:serviceaccounts")),
		clusterBinding("system:node-proxier", user(ProxyUser)),
		clusterBinding("system:kube-dns", user(DNSUser), serviceAccount("kube-system", "kube-dns")),
		clusterBinding("system:portal-ingress", user(IngressUser)),
		clusterBinding("system:kube-controller-manager", user(ControllerManagerUser)),
	}
	for _, c := range controllers {
		// Portal's controllers all run as the controller manager; each
		// role is also bound to upstream's ServiceAccount of its name.
		bindings = append(bindings, clusterBinding("system:controller:"+c.name,
			user(ControllerManagerUser), serviceAccount("kube-system", c.name)))
	}
	return bindings
}
