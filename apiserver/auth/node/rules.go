package node

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// Rules returns the rules of the system:node ClusterRole: what Portal's
// node agent (agent/) does with the API, and nothing more. The Node
// authorizer applies them to node users for every request it does not
// decide from its graph.
//
// Secrets, ConfigMaps, PersistentVolumeClaims and serviceaccounts/token
// are absent on purpose: a node may read those only for the pods bound to
// it, which the Node authorizer checks and a ClusterRole cannot express.
// Leases and pods are here for RBAC's sake (the role is meant to be
// usable on its own), though the Node authorizer narrows both further.
func Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// The agent registers its Node and updates its labels and pod
		// CIDRs; it watches every Node to route to the other nodes' pod
		// CIDRs. NodeRestriction limits writes to the node's own object.
		rule("", "nodes", "create", "get", "list", "watch", "update"),
		// Heartbeats and conditions.
		rule("", "nodes/status", "update"),
		// The agent's Lease in kube-node-lease, renewed as a heartbeat.
		rule("coordination.k8s.io", "leases", "create", "get", "update"),
		// Its pods (watched with a spec.nodeName field selector), re-read
		// after a status conflict, and deleted once stopped.
		rule("", "pods", "get", "list", "watch", "delete"),
		rule("", "pods/status", "update"),
		// Services, for the environment variables of the pods it starts.
		rule("", "services", "list", "watch"),
		// The kubernetes Service's EndpointSlices, from which the agent's
		// API load balancer learns every API server (RBAC cannot narrow
		// this to one Service; kube-proxy on the node reads them all).
		rule("discovery.k8s.io", "endpointslices", "list", "watch"),
		// Events about its pods (an event recorder creates them, and
		// patches the count of one that repeats).
		rule("", "events", "create", "patch"),
	}
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}
