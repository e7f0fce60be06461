package apiserver

import (
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver/auth"
	"portal.dev/portal/apiserver/auth/rbac"
	"portal.dev/portal/apiserver/registry"
)

// authorization is the authorizer chain of --authorization-mode and what
// the registry needs of it.
type authorization struct {
	authorizer authorizer.Authorizer
	rules      authorizer.RuleResolver
	// escalation checks role and binding writes; nil without RBAC.
	escalation *registry.Escalation
	// synced reports whether the caches the modes decide from are filled.
	synced []func() bool
}

// newAuthorization builds the chain of modes over informers of factory
// (which the generic server starts), so that no decision reads etcd.
func newAuthorization(modes []string, factory informers.SharedInformerFactory) (*authorization, error) {
	var named []auth.Named
	var rbacAuthorizer *rbac.Authorizer
	var synced []func() bool
	for _, m := range modes {
		switch m {
		case auth.ModeAlwaysAllow:
			klog.InfoS("Warning: --authorization-mode AlwaysAllow lets every authenticated user do everything")
			a := authorizerfactory.NewAlwaysAllowAuthorizer()
			named = append(named, auth.Named{Mode: m, Authorizer: a, Rules: a})
		case auth.ModeNode:
			a, hasSynced, err := nodeAuthorizer(factory)
			if err != nil {
				return nil, fmt.Errorf("--authorization-mode %s: %w", m, err)
			}
			named = append(named, auth.Named{Mode: m, Authorizer: auth.WaitForSync(a, hasSynced...)})
			synced = append(synced, hasSynced...)
		case auth.ModeRBAC:
			v1 := factory.Rbac().V1()
			crbs := v1.ClusterRoleBindings().Informer()
			if err := crbs.AddIndexers(cache.Indexers{rbac.SubjectIndex: rbac.IndexBySubject}); err != nil {
				return nil, err
			}
			rbacAuthorizer = rbac.New(rbac.Listers{
				Roles: v1.Roles().Lister(), ClusterRoles: v1.ClusterRoles().Lister(),
				RoleBindings: v1.RoleBindings().Lister(), ClusterRoleBindings: v1.ClusterRoleBindings().Lister(),
				ClusterRoleBindingIndex: crbs.GetIndexer(),
			})
			rbacSynced := []func() bool{v1.Roles().Informer().HasSynced, v1.ClusterRoles().Informer().HasSynced,
				v1.RoleBindings().Informer().HasSynced, v1.ClusterRoleBindings().Informer().HasSynced}
			named = append(named, auth.Named{Mode: m, Authorizer: auth.WaitForSync(rbacAuthorizer, rbacSynced...), Rules: rbacAuthorizer})
			synced = append(synced, rbacSynced...)
		default:
			return nil, fmt.Errorf("--authorization-mode: unknown mode %q", m)
		}
	}
	a, rules, err := auth.Chain(named...)
	if err != nil {
		return nil, err
	}
	out := &authorization{authorizer: a, rules: rules, synced: synced}
	if rbacAuthorizer != nil {
		out.escalation = &registry.Escalation{Authorizer: a, Rules: rbacAuthorizer.Resolver()}
	}
	return out, nil
}

// readyCheck keeps /readyz from saying ok before the caches the modes
// decide from are filled: until then the modes keep requests of every user
// but system:masters waiting (see auth.WaitForSync), and load balancers
// should send them elsewhere.
func (a *authorization) readyCheck() healthz.HealthChecker {
	return healthz.NamedCheck("authorization-caches", func(*http.Request) error {
		for _, s := range a.synced {
			if !s() {
				return fmt.Errorf("authorization caches not synced yet")
			}
		}
		return nil
	})
}
