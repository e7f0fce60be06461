package registry

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"portal.dev/portal/apiserver/scheme"
)

// Kinds returns every served resource, in the order discovery lists them.
// cfg carries the cluster settings some strategies need.
func Kinds(cfg Config) []Kind {
	services := &storedServices{}
	core, discovery := corev1.SchemeGroupVersion, discoveryv1.SchemeGroupVersion
	coordination, networking := coordinationv1.SchemeGroupVersion, networkingv1.SchemeGroupVersion
	kinds := []Kind{
		{GroupVersion: core, Resource: "namespaces", Singular: "namespace", ShortNames: []string{"ns"},
			HasStatus: true, Hooks: namespaceHooks(), ShouldDeleteDuringUpdate: shouldDeleteNamespaceDuringUpdate,
			New: func() runtime.Object { return &corev1.Namespace{} }, NewList: func() runtime.Object { return &corev1.NamespaceList{} }},
		{GroupVersion: core, Resource: "nodes", Singular: "node", ShortNames: []string{"no"},
			HasStatus: true, KeepStatusOnCreate: true, Hooks: nodeHooks(),
			New: func() runtime.Object { return &corev1.Node{} }, NewList: func() runtime.Object { return &corev1.NodeList{} }},
		{GroupVersion: core, Resource: "pods", Singular: "pod", ShortNames: []string{"po"}, Categories: []string{"all"},
			Namespaced: true, HasStatus: true, Hooks: podHooks(), Delete: podDeleteStrategy{scheme.Scheme},
			New: func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} }},
		{GroupVersion: core, Resource: "services", Singular: "service", ShortNames: []string{"svc"}, Categories: []string{"all"},
			Namespaced: true, HasStatus: true, Hooks: serviceHooks(cfg),
			BeginCreate: serviceBeginCreate(cfg, services), BeginUpdate: serviceBeginUpdate(cfg, services), AfterDelete: serviceAfterDelete(cfg),
			AfterUpdate: services.afterUpdate(cfg), WrapStorage: services.wrap,
			New: func() runtime.Object { return &corev1.Service{} }, NewList: func() runtime.Object { return &corev1.ServiceList{} }},
		{GroupVersion: core, Resource: "endpoints", Singular: "endpoints", ShortNames: []string{"ep"},
			Namespaced: true, Hooks: endpointsHooks(),
			New: func() runtime.Object { return &corev1.Endpoints{} }, NewList: func() runtime.Object { return &corev1.EndpointsList{} }},
		{GroupVersion: core, Resource: "secrets", Singular: "secret",
			Namespaced: true, Hooks: secretHooks(),
			New: func() runtime.Object { return &corev1.Secret{} }, NewList: func() runtime.Object { return &corev1.SecretList{} }},
		{GroupVersion: core, Resource: "configmaps", Singular: "configmap", ShortNames: []string{"cm"},
			Namespaced: true, Hooks: configMapHooks(),
			New: func() runtime.Object { return &corev1.ConfigMap{} }, NewList: func() runtime.Object { return &corev1.ConfigMapList{} }},
		{GroupVersion: core, Resource: "events", Singular: "event", ShortNames: []string{"ev"},
			Namespaced: true, Hooks: eventHooks(),
			New: func() runtime.Object { return &corev1.Event{} }, NewList: func() runtime.Object { return &corev1.EventList{} }},
		{GroupVersion: core, Resource: "serviceaccounts", Singular: "serviceaccount", ShortNames: []string{"sa"},
			Namespaced: true, Hooks: serviceAccountHooks(),
			New: func() runtime.Object { return &corev1.ServiceAccount{} }, NewList: func() runtime.Object { return &corev1.ServiceAccountList{} }},
		{GroupVersion: discovery, Resource: "endpointslices", Singular: "endpointslice",
			Namespaced: true, Hooks: endpointSliceHooks(),
			New: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, NewList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} }},
		{GroupVersion: coordination, Resource: "leases", Singular: "lease",
			Namespaced: true, Hooks: leaseHooks(),
			New: func() runtime.Object { return &coordinationv1.Lease{} }, NewList: func() runtime.Object { return &coordinationv1.LeaseList{} }},
		{GroupVersion: networking, Resource: "ingresses", Singular: "ingress", ShortNames: []string{"ing"},
			Namespaced: true, HasStatus: true, Hooks: ingressHooks(),
			New: func() runtime.Object { return &networkingv1.Ingress{} }, NewList: func() runtime.Object { return &networkingv1.IngressList{} }},
		{GroupVersion: networking, Resource: "ingressclasses", Singular: "ingressclass",
			Hooks: ingressClassHooks(),
			New:   func() runtime.Object { return &networkingv1.IngressClass{} }, NewList: func() runtime.Object { return &networkingv1.IngressClassList{} }},
	}
	kinds = append(kinds, appsKinds()...)
	return append(kinds, rbacKinds(cfg)...)
}
