package scheme

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"portal.dev/portal/apiserver/defaults"
)

// addDefaulters registers the static defaulting of each served type. The
// decoder runs it on every object it reads, from a request or from storage.
// Defaulting that depends on the cluster (a Service's IP families) happens
// in the registry instead.
func addDefaulters(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(obj any) {
		defaults.Service(obj.(*corev1.Service), defaults.ServiceConfig{})
	})
	s.AddTypeDefaultingFunc(&corev1.Pod{}, func(obj any) { defaults.Pod(obj.(*corev1.Pod)) })
	s.AddTypeDefaultingFunc(&corev1.Namespace{}, func(obj any) { defaults.Namespace(obj.(*corev1.Namespace)) })
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(obj any) { defaults.Secret(obj.(*corev1.Secret)) })
	s.AddTypeDefaultingFunc(&corev1.ConfigMap{}, func(obj any) { defaults.ConfigMap(obj.(*corev1.ConfigMap)) })
	s.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(obj any) { defaults.Endpoints(obj.(*corev1.Endpoints)) })
	s.AddTypeDefaultingFunc(&corev1.Node{}, func(obj any) { defaults.Node(obj.(*corev1.Node)) })
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSlice{}, func(obj any) {
		defaults.EndpointSlice(obj.(*discoveryv1.EndpointSlice))
	})
	s.AddTypeDefaultingFunc(&networkingv1.IngressClass{}, func(obj any) {
		defaults.IngressClass(obj.(*networkingv1.IngressClass))
	})
	s.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(obj any) { defaults.Deployment(obj.(*appsv1.Deployment)) })
	s.AddTypeDefaultingFunc(&appsv1.ReplicaSet{}, func(obj any) { defaults.ReplicaSet(obj.(*appsv1.ReplicaSet)) })
	s.AddTypeDefaultingFunc(&appsv1.StatefulSet{}, func(obj any) { defaults.StatefulSet(obj.(*appsv1.StatefulSet)) })
	s.AddTypeDefaultingFunc(&rbacv1.RoleBinding{}, func(obj any) { defaults.RoleBinding(obj.(*rbacv1.RoleBinding)) })
	s.AddTypeDefaultingFunc(&rbacv1.ClusterRoleBinding{}, func(obj any) {
		defaults.ClusterRoleBinding(obj.(*rbacv1.ClusterRoleBinding))
	})
	s.AddTypeDefaultingFunc(&appsv1.DaemonSet{}, func(obj any) { defaults.DaemonSet(obj.(*appsv1.DaemonSet)) })
}
