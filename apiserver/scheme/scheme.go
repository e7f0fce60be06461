// Package scheme holds the runtime.Scheme the API server serves from.
//
// Portal serves the k8s.io/api versioned Go types directly: each served type is
// registered under its real version (v1) and, as the same Go type, under the
// group's __internal version. Converting between the two is then a no-op that
// only sets the kind, and the generic registry, server-side apply and the
// watch cache get the internal version they expect. This package owns that
// registration, the field selectors each kind supports and the static
// defaulting hooks; it must not hold any server state.
package scheme

import (
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

var (
	// Scheme knows every served type under its versioned and internal kinds.
	Scheme = runtime.NewScheme()
	// Codecs serializes objects of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
	// ParameterCodec decodes query parameters into option structs.
	ParameterCodec = runtime.NewParameterCodec(Scheme)

	// Versioned knows only the versioned kinds. The OpenAPI definition namer
	// reads it, so that the published schemas carry no __internal kinds.
	Versioned = runtime.NewScheme()
)

// Group describes one served API group version and the kinds it holds.
type Group struct {
	Version schema.GroupVersion
	// Types are the served objects, each followed by its list type.
	Types []runtime.Object
}

// Groups lists what the API server serves, core group first.
var Groups = []Group{
	{Version: corev1.SchemeGroupVersion, Types: []runtime.Object{
		&corev1.Namespace{}, &corev1.NamespaceList{},
		&corev1.Node{}, &corev1.NodeList{},
		&corev1.Pod{}, &corev1.PodList{},
		&corev1.Service{}, &corev1.ServiceList{},
		&corev1.Endpoints{}, &corev1.EndpointsList{},
		&corev1.Secret{}, &corev1.SecretList{},
		&corev1.ConfigMap{}, &corev1.ConfigMapList{},
		&corev1.Event{}, &corev1.EventList{},
		&corev1.ServiceAccount{}, &corev1.ServiceAccountList{},
		&corev1.Binding{}, &corev1.PodLogOptions{},
		&corev1.PodExecOptions{}, &corev1.PodAttachOptions{}, &corev1.PodPortForwardOptions{}, &corev1.NodeProxyOptions{},
	}},
	{Version: discoveryv1.SchemeGroupVersion, Types: []runtime.Object{
		&discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{},
	}},
	{Version: coordinationv1.SchemeGroupVersion, Types: []runtime.Object{
		&coordinationv1.Lease{}, &coordinationv1.LeaseList{},
	}},
	{Version: networkingv1.SchemeGroupVersion, Types: []runtime.Object{
		&networkingv1.Ingress{}, &networkingv1.IngressList{},
		&networkingv1.IngressClass{}, &networkingv1.IngressClassList{},
	}},
	{Version: appsv1.SchemeGroupVersion, Types: []runtime.Object{
		&appsv1.Deployment{}, &appsv1.DeploymentList{},
		&appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{},
		&appsv1.StatefulSet{}, &appsv1.StatefulSetList{},
		&appsv1.DaemonSet{}, &appsv1.DaemonSetList{},
		&appsv1.ControllerRevision{}, &appsv1.ControllerRevisionList{},
	}},
	{Version: rbacv1.SchemeGroupVersion, Types: []runtime.Object{
		&rbacv1.Role{}, &rbacv1.RoleList{},
		&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleList{},
		&rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{},
		&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{},
	}},
	{Version: authorizationv1.SchemeGroupVersion, Types: []runtime.Object{
		&authorizationv1.SelfSubjectRulesReview{},
		&authorizationv1.SelfSubjectAccessReview{},
		&authorizationv1.SubjectAccessReview{},
		&authorizationv1.LocalSubjectAccessReview{},
	}},
	{Version: authenticationv1.SchemeGroupVersion, Types: []runtime.Object{
		&authenticationv1.TokenReview{},
		&authenticationv1.SelfSubjectReview{},
	}},
	// Read-only, from the node agents' figures (apiserver/metricsapi).
	{Version: metricsv1beta1.SchemeGroupVersion, Types: []runtime.Object{
		&metricsv1beta1.NodeMetrics{}, &metricsv1beta1.NodeMetricsList{},
		&metricsv1beta1.PodMetrics{}, &metricsv1beta1.PodMetricsList{},
	}},
}

// subresourceTypes are served only as subresources of other groups' kinds:
// the scale subresource of deployments, replicasets and statefulsets speaks
// autoscaling/v1 Scale, as upstream's does, and serviceaccounts/token
// authentication.k8s.io/v1 TokenRequest (whose group serves only the
// reviews, in Groups). No autoscaling resource is served.
var subresourceTypes = []Group{
	{Version: autoscalingv1.SchemeGroupVersion, Types: []runtime.Object{&autoscalingv1.Scale{}}},
	{Version: authenticationv1.SchemeGroupVersion, Types: []runtime.Object{&authenticationv1.TokenRequest{}}},
}

func init() {
	utilruntime.Must(addAll(Scheme, true))
	utilruntime.Must(addAll(Versioned, false))
}

func addAll(s *runtime.Scheme, internal bool) error {
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, discoveryv1.AddToScheme,
		coordinationv1.AddToScheme, networkingv1.AddToScheme,
		appsv1.AddToScheme, autoscalingv1.AddToScheme,
		rbacv1.AddToScheme, authorizationv1.AddToScheme,
		authenticationv1.AddToScheme, metricsv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	if !internal {
		return nil
	}
	if err := metainternalversion.AddToScheme(s); err != nil {
		return err
	}
	// The empty group's v1 must know the meta option types, and some
	// responses are unversioned.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	s.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{})
	for _, g := range append(Groups[:len(Groups):len(Groups)], subresourceTypes...) {
		internalGV := schema.GroupVersion{Group: g.Version.Group, Version: runtime.APIVersionInternal}
		s.AddKnownTypes(internalGV, g.Types...)
	}
	if err := addParameterConversions(s); err != nil {
		return err
	}
	if err := addFieldSelectors(s); err != nil {
		return err
	}
	addDefaulters(s)
	return nil
}
