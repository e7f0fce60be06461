package apiserver

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"

	"portal.dev/portal/apiserver/auth/node"
)

// nodeAuthorizer returns the Node authorizer over factory's informers and
// what reports that its caches are filled.
func nodeAuthorizer(factory informers.SharedInformerFactory) (authorizer.Authorizer, []func() bool, error) {
	a, err := node.NewAuthorizer(factory)
	if err != nil {
		return nil, nil, err
	}
	return a, []func() bool{a.HasSynced}, nil
}

// nodeRules returns the rules of the system:node ClusterRole.
func nodeRules() []rbacv1.PolicyRule { return node.Rules() }
