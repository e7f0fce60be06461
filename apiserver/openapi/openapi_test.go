package openapi

import (
	"sort"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	endpointsopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	openapiutil "k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// definitions returns the generated definitions with a reference callback that
// records nothing; the keys are OpenAPI model names.
func definitions() map[string]common.OpenAPIDefinition {
	return GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + common.EscapeJsonPointer(name))
	})
}

// newScheme registers every API group Portal serves from k8s.io/api.
func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		discoveryv1.AddToScheme,
		coordinationv1.AddToScheme,
		networkingv1.AddToScheme,
		authenticationv1.AddToScheme,
		policyv1.AddToScheme,
		autoscalingv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatalf("building scheme: %v", err)
		}
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return scheme
}

func TestGetOpenAPIDefinitionsContainsServedTypes(t *testing.T) {
	defs := definitions()
	for _, name := range []string{
		corev1.Service{}.OpenAPIModelName(),
		corev1.Pod{}.OpenAPIModelName(),
		discoveryv1.EndpointSlice{}.OpenAPIModelName(),
		networkingv1.Ingress{}.OpenAPIModelName(),
		metav1.ObjectMeta{}.OpenAPIModelName(),
	} {
		if _, ok := defs[name]; !ok {
			t.Errorf("no OpenAPI definition for %q", name)
		}
	}
	// The keys are model names, not Go import paths: this is what
	// k8s.io/apiserver's DefinitionNamer and kube-openapi's builders look up.
	if got, want := (corev1.Service{}).OpenAPIModelName(), "io.k8s.api.core.v1.Service"; got != want {
		t.Errorf("Service model name = %q, want %q", got, want)
	}
	if _, ok := defs["k8s.io/api/core/v1.Service"]; ok {
		t.Errorf("definitions unexpectedly keyed by Go type name")
	}
}

// TestDefinitionClosure asserts every reference made by any definition
// resolves to a definition in the map.
func TestDefinitionClosure(t *testing.T) {
	defs := definitions()
	var missing []string
	seen := map[string]bool{}
	total := 0
	for name, def := range defs {
		for _, dep := range def.Dependencies {
			total++
			if _, ok := defs[dep]; !ok && !seen[dep] {
				seen[dep] = true
				missing = append(missing, dep+" (from "+name+")")
			}
		}
	}
	if total == 0 {
		t.Fatal("no dependencies found in any definition; closure check is vacuous")
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("unresolved OpenAPI dependency: %s", m)
	}
}

// TestRefsResolve checks the refs emitted by the ref callback (which is what
// ends up in the served document) against the map, independently of the
// Dependencies lists.
func TestRefsResolve(t *testing.T) {
	var refs []string
	defs := GetOpenAPIDefinitions(func(name string) spec.Ref {
		refs = append(refs, name)
		return spec.MustCreateRef("#/definitions/" + common.EscapeJsonPointer(name))
	})
	if len(refs) == 0 {
		t.Fatal("no references recorded")
	}
	for _, r := range refs {
		if _, ok := defs[r]; !ok {
			t.Errorf("ref(%q) has no definition", r)
		}
	}
}

// TestSchemeKindsHaveDefinitions checks that every external kind registered
// by the served groups has a definition under the name the generic server's
// DefinitionNamer computes for it.
func TestSchemeKindsHaveDefinitions(t *testing.T) {
	scheme := newScheme(t)
	defs := definitions()
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			t.Errorf("%v: %v", gvk, err)
			continue
		}
		if _, ok := defs[name]; !ok {
			t.Errorf("%v: no definition named %q", gvk, name)
		}
	}
}

// servedResourceNames returns the canonical names of every external kind in
// the scheme, the same way genericapiserver's getResourceNamesForGroup does.
func servedResourceNames(t *testing.T, scheme *runtime.Scheme) []string {
	t.Helper()
	set := map[string]bool{}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		obj, err := scheme.New(gvk)
		if err != nil {
			t.Fatalf("%v: %v", gvk, err)
		}
		set[openapiutil.GetCanonicalTypeName(obj)] = true
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TestTypeConverter builds the server-side-apply type converter exactly as
// the generic API server does (DefaultOpenAPIV3Config + builder3 +
// managedfields.NewTypeConverter) and converts objects to typed values.
func TestTypeConverter(t *testing.T) {
	scheme := newScheme(t)
	getDefs := utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(GetOpenAPIDefinitions)
	config := genericapiserver.DefaultOpenAPIV3Config(getDefs, endpointsopenapi.NewDefinitionNamer(scheme))

	schemas, err := builder3.BuildOpenAPIDefinitionsForResources(config, servedResourceNames(t, scheme)...)
	if err != nil {
		t.Fatalf("BuildOpenAPIDefinitionsForResources: %v", err)
	}

	svcSchema, ok := schemas[corev1.Service{}.OpenAPIModelName()]
	if !ok {
		t.Fatalf("built spec has no Service schema")
	}
	if _, ok := svcSchema.Extensions["x-kubernetes-group-version-kind"]; !ok {
		t.Errorf("Service schema lacks x-kubernetes-group-version-kind; extensions: %v", svcSchema.Extensions)
	}

	tc, err := managedfields.NewTypeConverter(schemas, false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}

	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{
				Name:       "http",
				Protocol:   corev1.ProtocolTCP,
				Port:       80,
				TargetPort: intstr.FromString("http"),
			}},
		},
	}
	typed, err := tc.ObjectToTyped(svc)
	if err != nil {
		t.Fatalf("ObjectToTyped(Service): %v", err)
	}
	if typed == nil {
		t.Fatal("ObjectToTyped(Service) returned nil")
	}
	fields, err := typed.ToFieldSet()
	if err != nil {
		t.Fatalf("ToFieldSet: %v", err)
	}
	if fields.Empty() {
		t.Error("Service field set is empty")
	}
	back, err := tc.TypedToObject(typed)
	if err != nil {
		t.Fatalf("TypedToObject: %v", err)
	}
	if back.GetObjectKind().GroupVersionKind().Kind != "Service" {
		t.Errorf("round trip kind = %v", back.GetObjectKind().GroupVersionKind())
	}

	// A few more served kinds, one per group.
	port := int32(80)
	proto := corev1.ProtocolTCP
	for _, obj := range []runtime.Object{
		&corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		},
		&discoveryv1.EndpointSlice{
			TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  metav1.ObjectMeta{Name: "web-abc"},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
			Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
		},
		&networkingv1.Ingress{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
			ObjectMeta: metav1.ObjectMeta{Name: "ing"},
		},
		&coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: "lease"},
		},
		&autoscalingv1.Scale{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
			ObjectMeta: metav1.ObjectMeta{Name: "s"},
		},
	} {
		if _, err := tc.ObjectToTyped(obj); err != nil {
			t.Errorf("ObjectToTyped(%v): %v", obj.GetObjectKind().GroupVersionKind(), err)
		}
	}
}

// TestOpenAPIV2Build checks the definitions also build a v2 document for the
// served resources (/openapi/v2, used by older kubectl explain/validation).
func TestOpenAPIV2Build(t *testing.T) {
	scheme := newScheme(t)
	getDefs := utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(GetOpenAPIDefinitions)
	config := genericapiserver.DefaultOpenAPIConfig(getDefs, endpointsopenapi.NewDefinitionNamer(scheme))
	swagger, err := builder.BuildOpenAPIDefinitionsForResources(config, servedResourceNames(t, scheme)...)
	if err != nil {
		t.Fatalf("BuildOpenAPIDefinitionsForResources (v2): %v", err)
	}
	if _, ok := swagger.Definitions[corev1.Pod{}.OpenAPIModelName()]; !ok {
		t.Errorf("v2 spec has no Pod definition")
	}
}
