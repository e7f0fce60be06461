package route

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sources is an in-memory Sources.
type sources struct {
	services map[types.NamespacedName]*corev1.Service
	secrets  map[types.NamespacedName]*corev1.Secret
	slices   map[types.NamespacedName][]*discoveryv1.EndpointSlice
}

func newSources() *sources {
	return &sources{
		services: map[types.NamespacedName]*corev1.Service{},
		secrets:  map[types.NamespacedName]*corev1.Secret{},
		slices:   map[types.NamespacedName][]*discoveryv1.EndpointSlice{},
	}
}

func (s *sources) Service(nn types.NamespacedName) *corev1.Service { return s.services[nn] }
func (s *sources) Secret(nn types.NamespacedName) *corev1.Secret   { return s.secrets[nn] }
func (s *sources) EndpointSlices(nn types.NamespacedName) []*discoveryv1.EndpointSlice {
	return s.slices[nn]
}

// addService adds Service ns/name with ports "name:port" given as pairs,
// and one ready endpoint 10.0.0.1 on targetPort port+1000 per port.
func (s *sources) addService(ns, name string, ports ...corev1.ServicePort) {
	nn := types.NamespacedName{Namespace: ns, Name: name}
	s.services[nn] = &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: ports},
	}
}

func svcPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port}
}

// slice makes an EndpointSlice of the Service with one port and the
// endpoints given.
func slice(ns, svc, name string, af discoveryv1.AddressType, portName string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: af,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints:   eps,
	}
}

func ep(addr string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
}

func ptr[T any](v T) *T { return &v }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ingress makes Ingress ns/name created age minutes after epoch.
func ingress(ns, name string, age int, rules ...networkingv1.IngressRule) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))},
		Spec: networkingv1.IngressSpec{Rules: rules},
	}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

// hpath makes a path to Service svc port 80.
func hpath(p string, pt networkingv1.PathType, svc string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: &pt, Backend: serviceBackend(svc, 80)}
}

func serviceBackend(svc string, port int32) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
		Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}
}

const (
	exact    = networkingv1.PathTypeExact
	prefix   = networkingv1.PathTypePrefix
	implSpec = networkingv1.PathTypeImplementationSpecific
)

// build builds a Table of ings against src.
func build(src *sources, ings ...*networkingv1.Ingress) *Result {
	return Build(Input{Ingresses: ings, Sources: src, Now: epoch})
}

// routed describes a Match for comparison: "svc(host path)", "404" or
// "503 text".
func routed(m Match) string {
	switch {
	case m.Backend == nil:
		return "404"
	case m.Backend.Unavailable != "":
		return "503 " + m.Backend.Unavailable
	}
	return fmt.Sprintf("%s(%s %s)", m.Backend.Service.Name, m.Host, m.Path)
}
