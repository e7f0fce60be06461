package apiserver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"portal.dev/portal/apiserver/auth/rbac/policy"
)

// addRBACBootstrapHook reconciles the bootstrap RBAC policy through the
// loopback client once the server serves. The hook returns only when the
// policy is in place, so /readyz (which waits for post-start hooks) says
// ok only then: a component started on readiness finds its role bound.
func addRBACBootstrapHook(s *genericapiserver.GenericAPIServer) error {
	return s.AddPostStartHook("rbac/bootstrap-roles", unlessStopped(func(hc genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(hc.LoopbackClientConfig)
		if err != nil {
			return err
		}
		return wait.PollUntilContextCancel(hc.Context, time.Second, true, func(ctx context.Context) (bool, error) {
			if err := policy.Reconcile(ctx, client, nodeRules()); err != nil {
				klog.InfoS("Bootstrap RBAC policy not reconciled yet; retrying", "err", err)
				return false, nil
			}
			return true, nil
		})
	}))
}
