package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"portal.dev/portal/apiserver/validation"
)

// fakeAllocate stands in for the registry's allocator: the first host of
// each family's range, and node ports from the bottom of the range.
func fakeAllocate(s *corev1.Service, cfg ServiceConfig) {
	if s.Spec.Type == corev1.ServiceTypeExternalName || s.Spec.ClusterIP == corev1.ClusterIPNone {
		return
	}
	s.Spec.ClusterIPs = nil
	for _, fam := range s.Spec.IPFamilies {
		r, _ := cfg.RangeFor(fam)
		s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, r.Addr().Next().String())
	}
	s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
	if s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = int32(30000 + i)
		}
	}
	if needsHealthCheckNodePort(s) {
		s.Spec.HealthCheckNodePort = 31000
	}
}

// TestDefaultedServicesValidate pins that what defaulting produces is what
// validation accepts, for the shapes clients commonly send.
func TestDefaultedServicesValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  ServiceConfig
		edit func(*corev1.Service)
	}{
		{name: "ClusterIP", cfg: cfgV4},
		{name: "NodePort", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }},
		{name: "LoadBalancer Local", cfg: cfgV4, edit: func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
		}},
		{name: "ExternalName", cfg: cfgV4, edit: func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.Ports = corev1.ServiceTypeExternalName, "db.example.com", nil
		}},
		{name: "headless", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.ClusterIP = "None" }},
		{name: "headless selectorless on single-stack", cfg: cfgV4, edit: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.Selector = "None", nil
		}},
		{name: "PreferDualStack on dual-stack", cfg: cfgDual, edit: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr(prefer) }},
		{name: "ClientIP affinity", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }},
		{name: "externalIPs", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.10"} }},
		{name: "two named ports", cfg: cfgV4, edit: func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromString("https")})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(corev1.ServiceTypeClusterIP)
			if tc.edit != nil {
				tc.edit(s)
			}
			Service(s, tc.cfg)
			if errs := ServiceIPFamilies(s, nil, tc.cfg); len(errs) != 0 {
				t.Fatalf("ServiceIPFamilies: got %v, want no errors", errs)
			}
			fakeAllocate(s, tc.cfg)
			if errs := validation.ValidateService(s, tc.cfg); len(errs) != 0 {
				t.Fatalf("ValidateService: got %v, want no errors", errs)
			}
			// A client re-applying its original manifest must also pass.
			again := newService(corev1.ServiceTypeClusterIP)
			if tc.edit != nil {
				tc.edit(again)
			}
			again.ResourceVersion, s.ResourceVersion = "1", "1"
			Service(again, tc.cfg)
			if errs := ServiceIPFamilies(again, s, tc.cfg); len(errs) != 0 {
				t.Fatalf("ServiceIPFamilies on update: got %v, want no errors", errs)
			}
			if errs := validation.ValidateServiceUpdate(again, s, tc.cfg); len(errs) != 0 {
				t.Fatalf("ValidateServiceUpdate: got %v, want no errors", errs)
			}
		})
	}
}

func TestDefaultedObjectsValidate(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
		}}, Volumes: []corev1.Volume{{Name: "scratch"}}},
	}
	Pod(pod)
	if errs := validation.ValidatePod(pod); len(errs) != 0 {
		t.Errorf("ValidatePod: got %v, want no errors", errs)
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.5"}}, Ports: []corev1.EndpointPort{{Port: 80}},
	}}}
	Endpoints(ep)
	if errs := validation.ValidateEndpoints(ep); len(errs) != 0 {
		t.Errorf("ValidateEndpoints: got %v, want no errors", errs)
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-x", Namespace: "ns"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}}},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(80))}},
	}
	EndpointSlice(es)
	if errs := validation.ValidateEndpointSlice(es); len(errs) != 0 {
		t.Errorf("ValidateEndpointSlice: got %v, want no errors", errs)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	Namespace(ns)
	if errs := validation.ValidateNamespace(ns); len(errs) != 0 {
		t.Errorf("ValidateNamespace: got %v, want no errors", errs)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, StringData: map[string]string{"password": "x"}}
	Secret(secret)
	if errs := validation.ValidateSecret(secret); len(errs) != 0 {
		t.Errorf("ValidateSecret: got %v, want no errors", errs)
	}
}
