package registry

import (
	appsv1 "k8s.io/api/apps/v1"
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
	return withStatus(typed(validation.ValidateDeployment, validation.ValidateDeploymentUpdate),
		validation.ValidateDeploymentStatusUpdate)
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
	return withStatus(typed(validation.ValidateDaemonSet, validation.ValidateDaemonSetUpdate),
		validation.ValidateDaemonSetStatusUpdate)
}

func controllerRevisionHooks() Hooks {
	return typed(validation.ValidateControllerRevision, validation.ValidateControllerRevisionUpdate)
}
