package apiserver

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	"portal.dev/portal/apiserver/registry"
)

// addReviews adds the create-only reviews answered by the server's
// authorizer and authenticator: the access reviews of authorization.k8s.io
// (`kubectl auth can-i`) and the SelfSubjectReview (`kubectl auth whoami`)
// and TokenReview of authentication.k8s.io.
func addReviews(storages map[schema.GroupVersion]map[string]rest.Storage, cfg registry.Config) {
	authz := storages[authorizationv1.SchemeGroupVersion]
	if authz == nil {
		authz = map[string]rest.Storage{}
		storages[authorizationv1.SchemeGroupVersion] = authz
	}
	authz["selfsubjectaccessreviews"] = registry.NewSelfSubjectAccessReviewREST(cfg.Authorizer)
	authz["subjectaccessreviews"] = registry.NewSubjectAccessReviewREST(cfg.Authorizer)
	authz["localsubjectaccessreviews"] = registry.NewLocalSubjectAccessReviewREST(cfg.Authorizer)
	storages[authenticationv1.SchemeGroupVersion] = map[string]rest.Storage{
		"selfsubjectreviews": registry.SelfSubjectReviewREST{},
		"tokenreviews":       registry.NewTokenReviewREST(cfg.Authenticator, cfg.APIAudiences),
	}
}
