package apiserver

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"portal.dev/portal/apiserver/registry"
	"portal.dev/portal/apiserver/scheme"
)

// installAPIs builds the storage of every served kind and installs it: the
// core group under /api, the others under /apis.
func installAPIs(s *genericapiserver.GenericAPIServer, opts generic.RESTOptionsGetter, cfg registry.Config, rules authorizer.RuleResolver, metrics *metricsAPI) error {
	storages := map[schema.GroupVersion]map[string]rest.Storage{}
	for _, k := range registry.Kinds(cfg) {
		m := storages[k.GroupVersion]
		if m == nil {
			m = map[string]rest.Storage{}
			storages[k.GroupVersion] = m
		}
		main, status, err := registry.NewStore(k, opts)
		if err != nil {
			return err
		}
		m[k.Resource] = main
		if status != nil {
			m[k.Resource+"/status"] = status
		}
		if k.HasScale {
			m[k.Resource+"/scale"] = registry.NewScaleREST(main.Store)
		}
		if k.Resource == "pods" {
			m[k.Resource+"/binding"] = registry.NewBindingREST(main)
		}
		if k.Resource == "namespaces" {
			m[k.Resource] = &registry.NamespaceREST{REST: main}
			m[k.Resource+"/finalize"] = registry.NewFinalizeREST(main)
		}
	}
	core := storages[corev1.SchemeGroupVersion]
	registry.AddStreamingSubresources(core, cfg.AgentTransport, cfg.Authorizer)
	core["pods/log"] = registry.NewLogREST(core["pods"].(*registry.REST), core["nodes"].(*registry.REST), cfg.AgentTransport)
	if cfg.Tokens != nil {
		core["serviceaccounts/token"] = registry.NewTokenREST(core["serviceaccounts"].(*registry.REST), core["pods"].(*registry.REST),
			core["secrets"].(*registry.REST), core["nodes"].(*registry.REST), cfg.Tokens, cfg.APIAudiences)
	}
	storages[authorizationv1.SchemeGroupVersion] = map[string]rest.Storage{
		"selfsubjectrulesreviews": registry.NewRulesReviewREST(rules),
	}
	addReviews(storages, cfg)
	metrics.add(storages)
	var groups []*genericapiserver.APIGroupInfo
	for _, g := range scheme.Groups {
		info := genericapiserver.NewDefaultAPIGroupInfo(g.Version.Group, scheme.Scheme, scheme.ParameterCodec, scheme.Codecs)
		info.VersionedResourcesStorageMap[g.Version.Version] = storages[g.Version]
		if g.Version.Group == "" {
			if err := s.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &info); err != nil {
				return err
			}
			continue
		}
		groups = append(groups, &info)
	}
	return s.InstallAPIGroups(groups...)
}
