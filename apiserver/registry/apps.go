package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"portal.dev/portal/apiserver/validation"
)

// appsKinds returns the apps/v1 resources. The four workloads have status
// and belong to "all", all but DaemonSets have a scale; ControllerRevisions are the workloads' history and,
// as upstream, are in no category.
func appsKinds() []Kind {
	apps := appsv1.SchemeGroupVersion
	return []Kind{
		{GroupVersion: apps, Resource: "deployments", Singular: "deployment", ShortNames: []string{"deploy"},
			Categories: []string{"all"}, Namespaced: true, HasStatus: true, HasScale: true, Hooks: deploymentHooks(),
			New:     func() runtime.Object { return &appsv1.Deployment{} },
			NewList: func() runtime.Object { return &appsv1.DeploymentList{} }},
		{GroupVersion: apps, Resource: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"},
			Categories: []string{"all"}, Namespaced: true, HasStatus: true, HasScale: true, Hooks: replicaSetHooks(),
			New:     func() runtime.Object { return &appsv1.ReplicaSet{} },
			NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} }},
		{GroupVersion: apps, Resource: "statefulsets", Singular: "statefulset", ShortNames: []string{"sts"},
			Categories: []string{"all"}, Namespaced: true, HasStatus: true, HasScale: true, Hooks: statefulSetHooks(),
			New:     func() runtime.Object { return &appsv1.StatefulSet{} },
			NewList: func() runtime.Object { return &appsv1.StatefulSetList{} }},
		{GroupVersion: apps, Resource: "daemonsets", Singular: "daemonset", ShortNames: []string{"ds"},
			Categories: []string{"all"}, Namespaced: true, HasStatus: true, Hooks: daemonSetHooks(),
			New:     func() runtime.Object { return &appsv1.DaemonSet{} },
			NewList: func() runtime.Object { return &appsv1.DaemonSetList{} }},
		{GroupVersion: apps, Resource: "controllerrevisions", Singular: "controllerrevision",
			Namespaced: true, Hooks: controllerRevisionHooks(),
			New:     func() runtime.Object { return &appsv1.ControllerRevision{} },
			NewList: func() runtime.Object { return &appsv1.ControllerRevisionList{} }},
	}
}

func deploymentHooks() Hooks {
	h := withStatus(typed(validation.ValidateDeployment, validation.ValidateDeploymentUpdate),
		validation.ValidateDeploymentStatusUpdate)
	// The Deployment controller copies a Deployment's annotations (the
	// change-cause among them) to its ReplicaSets, so, as upstream, a change
	// of annotations moves the generation too and the controller sees it.
	h.PrepareForUpdate = func(obj, old runtime.Object) {
		d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
		if !apiequality.Semantic.DeepEqual(d.Annotations, o.Annotations) {
			d.Generation = o.Generation + 1
		}
	}
	// A status writer does not relabel a Deployment, as upstream.
	h.PrepareForStatusUpdate = func(obj, old runtime.Object) {
		obj.(*appsv1.Deployment).Labels = old.(*appsv1.Deployment).Labels
	}
	return h
}

func replicaSetHooks() Hooks {
	return withStatus(typed(validation.ValidateReplicaSet, validation.ValidateReplicaSetUpdate),
		validation.ValidateReplicaSetStatusUpdate)
}

func statefulSetHooks() Hooks {
	return withStatus(typed(validation.ValidateStatefulSet, validation.ValidateStatefulSetUpdate),
		validation.ValidateStatefulSetStatusUpdate)
}

func daemonSetHooks() Hooks {
	h := withStatus(typed(validation.ValidateDaemonSet, validation.ValidateDaemonSetUpdate),
		validation.ValidateDaemonSetStatusUpdate)
	// Upstream keeps a DaemonSet's template generation, 1 on create and one
	// more at each template change, and shows it in apps/v1 as the
	// deprecated.daemonset.template.generation annotation, which clients
	// cannot set; DaemonSet pods carry it as pod-template-generation.
	h.PrepareForCreate = func(obj runtime.Object) { setTemplateGeneration(obj.(*appsv1.DaemonSet), 1) }
	h.PrepareForUpdate = func(obj, old runtime.Object) {
		ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
		gen, _ := strconv.ParseInt(o.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
		if !apiequality.Semantic.DeepEqual(ds.Spec.Template, o.Spec.Template) {
			gen++
		}
		setTemplateGeneration(ds, gen)
	}
	// A status writer cannot move it either: the controller counts a pod
	// as updated when its pod-template-generation label equals it.
	h.PrepareForStatusUpdate = func(obj, old runtime.Object) {
		gen, _ := strconv.ParseInt(old.(*appsv1.DaemonSet).Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
		setTemplateGeneration(obj.(*appsv1.DaemonSet), gen)
	}
	return h
}

func setTemplateGeneration(ds *appsv1.DaemonSet, gen int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(gen, 10)
}

func controllerRevisionHooks() Hooks {
	return typed(validation.ValidateControllerRevision, validation.ValidateControllerRevisionUpdate)
}
