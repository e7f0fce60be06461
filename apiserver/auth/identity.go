package auth

import (
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
)

// NodeUserPrefix begins the user name of a node's agent: system:node:NAME,
// the name kubelets authenticate with, which the Node authorizer and the
// NodeRestriction admission plugin read the node's name from.
const NodeUserPrefix = "system:node:"

// NodeName returns the node a user acts for, when the user is a node's
// agent: named system:node:NAME and in group system:nodes, as upstream's
// node identifier requires. Both must hold, so that a credential minted for
// a person called system:node:x without the group is not treated as a node.
func NodeName(u user.Info) (string, bool) {
	if u == nil {
		return "", false
	}
	name, ok := strings.CutPrefix(u.GetName(), NodeUserPrefix)
	if !ok || name == "" {
		return "", false
	}
	for _, g := range u.GetGroups() {
		if g == user.NodesGroup {
			return name, true
		}
	}
	return "", false
}

// DefaultGroups returns the groups a credential for user gets when whoever
// mints it names none: a node's agent (system:node:NAME) is in system:nodes,
// as a kubelet's credential is; every other user is in no group.
func DefaultGroups(name string) []string {
	if n, ok := strings.CutPrefix(name, NodeUserPrefix); ok && n != "" {
		return []string{user.NodesGroup}
	}
	return nil
}
