package node

import (
	"testing"
)

// TestRulesCoverTheAgent lists what agent/ does with the API: each must be
// in system:node's rules. The reads the graph decides must not be, or
// RBAC would hand every node every Secret.
func TestRulesCoverTheAgent(t *testing.T) {
	for _, tc := range []struct {
		verb, group, resource, sub string
		want                       bool
	}{
		// Node registration, the informer of every Node, heartbeats.
		{"create", "", "nodes", "", true},
		{"get", "", "nodes", "", true},
		{"list", "", "nodes", "", true},
		{"watch", "", "nodes", "", true},
		{"update", "", "nodes", "", true},
		{"update", "", "nodes", "status", true},
		{"get", "coordination.k8s.io", "leases", "", true},
		{"create", "coordination.k8s.io", "leases", "", true},
		{"update", "coordination.k8s.io", "leases", "", true},
		// Its pods' informer, status writes, re-reads, deletes.
		{"list", "", "pods", "", true},
		{"watch", "", "pods", "", true},
		{"get", "", "pods", "", true},
		{"delete", "", "pods", "", true},
		{"update", "", "pods", "status", true},
		// The Service informer for environment variables.
		{"list", "", "services", "", true},
		{"watch", "", "services", "", true},
		// The event recorder.
		{"create", "", "events", "", true},
		{"patch", "", "events", "", true},

		// Decided by the graph alone.
		{"get", "", "secrets", "", false},
		{"get", "", "configmaps", "", false},
		{"get", "", "persistentvolumeclaims", "", false},
		{"create", "", "serviceaccounts", "token", false},
		// Never needed.
		{"create", "", "pods", "", false},
		{"delete", "", "nodes", "", false},
		{"create", "", "services", "", false},
		{"delete", "", "namespaces", "", false},
		{"delete", "coordination.k8s.io", "leases", "", false},
	} {
		name := tc.verb + " " + tc.resource
		if tc.sub != "" {
			name += "/" + tc.sub
		}
		t.Run(name, func(t *testing.T) {
			if got := rulesAllow(req(node1, tc.verb, tc.group, tc.resource, tc.sub, "ns", "x"), Rules()); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
