package apiserver

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
)

// nodeAuthorizer returns the Node authorizer over factory's informers and
// what reports that its caches are filled; nil when this build has none.
func nodeAuthorizer(factory informers.SharedInformerFactory) (authorizer.Authorizer, []func() bool) {
	return nil, nil
}

// nodeRules returns the rules of the system:node ClusterRole.
func nodeRules() []rbacv1.PolicyRule { return nil }
