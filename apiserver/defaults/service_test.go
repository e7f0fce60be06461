package defaults

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	cfgV4   = ServiceConfig{ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	cfgDual = ServiceConfig{ClusterIPRanges: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/108"),
	}}
	cfgDual6 = ServiceConfig{ClusterIPRanges: []netip.Prefix{
		netip.MustParsePrefix("fd00::/108"), netip.MustParsePrefix("10.0.0.0/24"),
	}}
	v4, v6 = corev1.IPv4Protocol, corev1.IPv6Protocol
)

func ptr[T any](v T) *T { return &v }

func newService(typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

func TestService(t *testing.T) {
	cases := []struct {
		name  string
		svc   func() *corev1.Service
		check func(t *testing.T, s *corev1.Service)
	}{
		{name: "type, protocol, targetPort, affinity, internal policy", svc: func() *corev1.Service { return newService("") },
			check: func(t *testing.T, s *corev1.Service) {
				expect(t, "type", s.Spec.Type, corev1.ServiceTypeClusterIP)
				expect(t, "protocol", s.Spec.Ports[0].Protocol, corev1.ProtocolTCP)
				expect(t, "targetPort", s.Spec.Ports[0].TargetPort, intstr.FromInt32(80))
				expect(t, "sessionAffinity", s.Spec.SessionAffinity, corev1.ServiceAffinityNone)
				expect(t, "internalTrafficPolicy", *s.Spec.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster)
				expect(t, "externalTrafficPolicy", s.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicy(""))
				expect(t, "allocateLoadBalancerNodePorts", s.Spec.AllocateLoadBalancerNodePorts, (*bool)(nil))
			}},
		{name: "named targetPort kept", svc: func() *corev1.Service {
			s := newService("")
			s.Spec.Ports[0].TargetPort = intstr.FromString("web")
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "targetPort", s.Spec.Ports[0].TargetPort, intstr.FromString("web"))
		}},
		{name: "empty string targetPort", svc: func() *corev1.Service {
			s := newService("")
			s.Spec.Ports[0].TargetPort = intstr.FromString("")
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "targetPort", s.Spec.Ports[0].TargetPort, intstr.FromInt32(80))
		}},
		{name: "ClientIP gets timeout", svc: func() *corev1.Service {
			s := newService("")
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "timeoutSeconds", *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, int32(10800))
		}},
		{name: "ClientIP timeout kept", svc: func() *corev1.Service {
			s := newService("")
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "timeoutSeconds", *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, int32(60))
		}},
		{name: "None drops affinity config", svc: func() *corev1.Service {
			s := newService("")
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "sessionAffinityConfig", s.Spec.SessionAffinityConfig, (*corev1.SessionAffinityConfig)(nil))
		}},
		{name: "NodePort gets externalTrafficPolicy", svc: func() *corev1.Service { return newService(corev1.ServiceTypeNodePort) },
			check: func(t *testing.T, s *corev1.Service) {
				expect(t, "externalTrafficPolicy", s.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicyCluster)
			}},
		{name: "ClusterIP with externalIPs gets externalTrafficPolicy", svc: func() *corev1.Service {
			s := newService(corev1.ServiceTypeClusterIP)
			s.Spec.ExternalIPs = []string{"192.0.2.1"}
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "externalTrafficPolicy", s.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicyCluster)
		}},
		{name: "LoadBalancer", svc: func() *corev1.Service {
			s := newService(corev1.ServiceTypeLoadBalancer)
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "allocateLoadBalancerNodePorts", *s.Spec.AllocateLoadBalancerNodePorts, true)
			expect(t, "externalTrafficPolicy", s.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicyCluster)
			expect(t, "ingress[0].ipMode", *s.Status.LoadBalancer.Ingress[0].IPMode, corev1.LoadBalancerIPModeVIP)
			expect(t, "ingress[1].ipMode", s.Status.LoadBalancer.Ingress[1].IPMode, (*corev1.LoadBalancerIPMode)(nil))
		}},
		{name: "LoadBalancer keeps allocateLoadBalancerNodePorts false", svc: func() *corev1.Service {
			s := newService(corev1.ServiceTypeLoadBalancer)
			s.Spec.AllocateLoadBalancerNodePorts = ptr(false)
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			expect(t, "allocateLoadBalancerNodePorts", *s.Spec.AllocateLoadBalancerNodePorts, false)
		}},
		{name: "ExternalName gets no internalTrafficPolicy", svc: func() *corev1.Service { return newService(corev1.ServiceTypeExternalName) },
			check: func(t *testing.T, s *corev1.Service) {
				expect(t, "internalTrafficPolicy", s.Spec.InternalTrafficPolicy, (*corev1.ServiceInternalTrafficPolicy)(nil))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.svc()
			Service(s, cfgV4)
			tc.check(t, s)
		})
	}
}

func expect[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %#v, want %#v", what, got, want)
	}
}

// familyResult is what ServiceIPFamilies should leave behind.
type familyResult struct {
	clusterIP  string
	clusterIPs []string
	policy     corev1.IPFamilyPolicy
	families   []corev1.IPFamily
	errField   string // non-empty: an error on this field, fields unchecked
	errDetail  string
}

func checkFamilies(t *testing.T, s *corev1.Service, errs field.ErrorList, want familyResult) {
	t.Helper()
	if want.errField != "" {
		for _, err := range errs {
			if err.Field == want.errField && strings.Contains(err.Detail, want.errDetail) {
				return
			}
		}
		t.Fatalf("got errors %v, want one on %s containing %q", errs, want.errField, want.errDetail)
	}
	if len(errs) != 0 {
		t.Fatalf("got errors %v, want none", errs)
	}
	expect(t, "clusterIP", s.Spec.ClusterIP, want.clusterIP)
	expect(t, "clusterIPs", s.Spec.ClusterIPs, want.clusterIPs)
	expect(t, "ipFamilies", s.Spec.IPFamilies, want.families)
	if want.policy == "" {
		expect(t, "ipFamilyPolicy", s.Spec.IPFamilyPolicy, (*corev1.IPFamilyPolicy)(nil))
	} else if s.Spec.IPFamilyPolicy == nil || *s.Spec.IPFamilyPolicy != want.policy {
		t.Errorf("ipFamilyPolicy: got %v, want %s", s.Spec.IPFamilyPolicy, want.policy)
	}
}

const (
	single  = corev1.IPFamilyPolicySingleStack
	prefer  = corev1.IPFamilyPolicyPreferDualStack
	require = corev1.IPFamilyPolicyRequireDualStack
)

func TestServiceIPFamiliesCreate(t *testing.T) {
	cases := []struct {
		name string
		cfg  ServiceConfig
		edit func(*corev1.Service)
		want familyResult
	}{
		{name: "default single-stack", cfg: cfgV4,
			want: familyResult{policy: single, families: []corev1.IPFamily{v4}}},
		{name: "default on IPv6-primary dual-stack", cfg: cfgDual6,
			want: familyResult{policy: single, families: []corev1.IPFamily{v6}}},
		{name: "clusterIP synced to clusterIPs", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0.5" },
			want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5"}, policy: single, families: []corev1.IPFamily{v4}}},
		{name: "family inferred from IPv6 clusterIP", cfg: cfgDual, edit: func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::5" },
			want: familyResult{clusterIP: "fd00::5", clusterIPs: []string{"fd00::5"}, policy: single, families: []corev1.IPFamily{v6}}},
		{name: "headless with selector", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.ClusterIP = "None" },
			want: familyResult{clusterIP: "None", clusterIPs: []string{"None"}, policy: single, families: []corev1.IPFamily{v4}}},
		{name: "headless selectorless on single-stack", cfg: cfgV4, edit: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.Selector = "None", nil
		}, want: familyResult{clusterIP: "None", clusterIPs: []string{"None"}, policy: require, families: []corev1.IPFamily{v4, v6}}},
		{name: "headless selectorless on IPv6-primary", cfg: cfgDual6, edit: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.Selector = "None", nil
		}, want: familyResult{clusterIP: "None", clusterIPs: []string{"None"}, policy: require, families: []corev1.IPFamily{v6, v4}}},
		{name: "headless selectorless SingleStack", cfg: cfgV4, edit: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.Selector, s.Spec.IPFamilyPolicy = "None", nil, ptr(single)
		}, want: familyResult{clusterIP: "None", clusterIPs: []string{"None"}, policy: single, families: []corev1.IPFamily{v4}}},
		{name: "PreferDualStack on dual-stack", cfg: cfgDual, edit: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr(prefer) },
			want: familyResult{policy: prefer, families: []corev1.IPFamily{v4, v6}}},
		{name: "PreferDualStack on single-stack", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr(prefer) },
			want: familyResult{policy: prefer, families: []corev1.IPFamily{v4}}},
		{name: "RequireDualStack on dual-stack with IPv6 first", cfg: cfgDual, edit: func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = ptr(require), []corev1.IPFamily{v6}
		}, want: familyResult{policy: require, families: []corev1.IPFamily{v6, v4}}},
		{name: "RequireDualStack on single-stack", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr(require) },
			want: familyResult{errField: "spec.ipFamilyPolicy", errDetail: "this cluster is not configured for dual-stack services"}},
		{name: "family not configured", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{v6} },
			want: familyResult{errField: "spec.ipFamilies[0]", errDetail: "not configured on this cluster"}},
		{name: "clusterIP of unconfigured family", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::5" },
			want: familyResult{errField: "spec.clusterIPs[0]", errDetail: "IPv6 is not configured on this cluster"}},
		{name: "SingleStack with two families", cfg: cfgDual, edit: func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = ptr(single), []corev1.IPFamily{v4, v6}
		}, want: familyResult{errField: "spec.ipFamilyPolicy", errDetail: "when multiple IP families are specified"}},
		{name: "malformed clusterIP", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0" },
			want: familyResult{errField: "spec.clusterIPs[0]", errDetail: "must be a valid IP address"}},
		{name: "ExternalName untouched", cfg: cfgV4, edit: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName },
			want: familyResult{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(corev1.ServiceTypeClusterIP)
			if tc.edit != nil {
				tc.edit(s)
			}
			errs := ServiceIPFamilies(s, nil, tc.cfg)
			checkFamilies(t, s, errs, tc.want)
		})
	}
}

// storedService is a ClusterIP (or other type) Service as the registry
// would have stored it after allocation.
func storedService(typ corev1.ServiceType, ips ...string) *corev1.Service {
	s := newService(typ)
	s.ResourceVersion = "1"
	s.Spec.ClusterIP, s.Spec.ClusterIPs = ips[0], ips
	for _, ip := range ips {
		fam := v4
		if strings.Contains(ip, ":") {
			fam = v6
		}
		s.Spec.IPFamilies = append(s.Spec.IPFamilies, fam)
	}
	s.Spec.IPFamilyPolicy = ptr(single)
	if len(ips) == 2 {
		s.Spec.IPFamilyPolicy = ptr(require)
	}
	return s
}

func TestServiceIPFamiliesUpdate(t *testing.T) {
	cases := []struct {
		name string
		cfg  ServiceConfig
		old  *corev1.Service
		edit func(*corev1.Service)
		want familyResult
	}{
		{name: "resubmitted manifest keeps allocations", cfg: cfgV4, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5"),
			edit: func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = "", nil, nil, nil
			},
			want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5"}, policy: single, families: []corev1.IPFamily{v4}}},
		{name: "old client drops clusterIPs", cfg: cfgDual, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5", "fd00::5"),
			edit: func(s *corev1.Service) { s.Spec.ClusterIPs = nil },
			want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5", "fd00::5"}, policy: require, families: []corev1.IPFamily{v4, v6}}},
		{name: "policy kept from old", cfg: cfgDual, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5", "fd00::5"),
			edit: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = nil },
			want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5", "fd00::5"}, policy: require, families: []corev1.IPFamily{v4, v6}}},
		{name: "downgrade to SingleStack trims", cfg: cfgDual, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5", "fd00::5"),
			edit: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr(single) },
			want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5"}, policy: single, families: []corev1.IPFamily{v4}}},
		{name: "downgrade without SingleStack", cfg: cfgDual, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5", "fd00::5"),
			edit: func(s *corev1.Service) { s.Spec.ClusterIPs = s.Spec.ClusterIPs[:1] },
			want: familyResult{errField: "spec.ipFamilyPolicy", errDetail: "must be 'SingleStack' to release the secondary cluster IP"}},
		{name: "upgrade to dual-stack", cfg: cfgDual, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5"),
			edit: func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr(prefer) },
			want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5"}, policy: prefer, families: []corev1.IPFamily{v4, v6}}},
		{name: "PreferDualStack left alone after cluster became single-stack", cfg: cfgV4, old: func() *corev1.Service {
			s := storedService(corev1.ServiceTypeClusterIP, "10.0.0.5", "fd00::5")
			s.Spec.IPFamilyPolicy = ptr(prefer)
			return s
		}(), want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5", "fd00::5"}, policy: prefer, families: []corev1.IPFamily{v4, v6}}},
		{name: "clusterIP change follows into clusterIPs", cfg: cfgV4, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5"),
			edit: func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0.6" },
			want: familyResult{clusterIP: "10.0.0.6", clusterIPs: []string{"10.0.0.6"}, policy: single, families: []corev1.IPFamily{v4}}},
		{name: "clearing clusterIP for ExternalName clears clusterIPs", cfg: cfgV4, old: storedService(corev1.ServiceTypeClusterIP, "10.0.0.5"),
			edit: func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ClusterIP, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "", "db.example.com"
			},
			want: familyResult{policy: single, families: []corev1.IPFamily{v4}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.old.DeepCopy()
			if tc.edit != nil {
				tc.edit(s)
			}
			errs := ServiceIPFamilies(s, tc.old, tc.cfg)
			checkFamilies(t, s, errs, tc.want)
		})
	}
}

func TestServiceIPFamiliesPatchesNodePorts(t *testing.T) {
	old := storedService(corev1.ServiceTypeLoadBalancer, "10.0.0.5")
	old.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "https", Port: 443, NodePort: 30443}}
	old.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	old.Spec.HealthCheckNodePort = 30100
	s := old.DeepCopy()
	s.Spec.Ports[0].NodePort = 0
	s.Spec.Ports[1].NodePort = 0
	s.Spec.HealthCheckNodePort = 0
	if errs := ServiceIPFamilies(s, old, cfgV4); len(errs) != 0 {
		t.Fatalf("got errors %v, want none", errs)
	}
	expect(t, "nodePorts", []int32{s.Spec.Ports[0].NodePort, s.Spec.Ports[1].NodePort}, []int32{30080, 30443})
	expect(t, "healthCheckNodePort", s.Spec.HealthCheckNodePort, int32(30100))
}

func TestServiceTypeTransition(t *testing.T) {
	cases := []struct {
		name  string
		old   func() *corev1.Service
		edit  func(*corev1.Service)
		check func(t *testing.T, s *corev1.Service)
	}{
		{name: "LoadBalancer to ClusterIP", old: func() *corev1.Service {
			s := storedService(corev1.ServiceTypeLoadBalancer, "10.0.0.5")
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30100
			s.Spec.AllocateLoadBalancerNodePorts = ptr(true)
			s.Spec.LoadBalancerClass = ptr("example.com/lb")
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			return s
		}, edit: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP },
			check: func(t *testing.T, s *corev1.Service) {
				expect(t, "nodePort", s.Spec.Ports[0].NodePort, int32(0))
				expect(t, "healthCheckNodePort", s.Spec.HealthCheckNodePort, int32(0))
				expect(t, "externalTrafficPolicy", s.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicy(""))
				expect(t, "allocateLoadBalancerNodePorts", s.Spec.AllocateLoadBalancerNodePorts, (*bool)(nil))
				expect(t, "loadBalancerClass", s.Spec.LoadBalancerClass, (*string)(nil))
				expect(t, "status", s.Status.LoadBalancer, corev1.LoadBalancerStatus{})
				expect(t, "clusterIP", s.Spec.ClusterIP, "10.0.0.5")
			}},
		{name: "changed nodePort is kept for validation", old: func() *corev1.Service {
			s := storedService(corev1.ServiceTypeNodePort, "10.0.0.5")
			s.Spec.Ports[0].NodePort = 30080
			return s
		}, edit: func(s *corev1.Service) { s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeClusterIP, 30081 },
			check: func(t *testing.T, s *corev1.Service) {
				expect(t, "nodePort", s.Spec.Ports[0].NodePort, int32(30081))
			}},
		{name: "ClusterIP to ExternalName", old: func() *corev1.Service { return storedService(corev1.ServiceTypeClusterIP, "10.0.0.5") },
			edit: func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
			},
			check: func(t *testing.T, s *corev1.Service) {
				expect(t, "clusterIP", s.Spec.ClusterIP, "")
				expect(t, "clusterIPs", s.Spec.ClusterIPs, []string(nil))
				expect(t, "ipFamilies", s.Spec.IPFamilies, []corev1.IPFamily(nil))
				expect(t, "ipFamilyPolicy", s.Spec.IPFamilyPolicy, (*corev1.IPFamilyPolicy)(nil))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.old()
			s := old.DeepCopy()
			tc.edit(s)
			ServiceTypeTransition(s, old)
			tc.check(t, s)
		})
	}
}

func TestServiceOnRead(t *testing.T) {
	cases := []struct {
		name string
		svc  func() *corev1.Service
		want familyResult
	}{
		{name: "pre-dual-stack object", svc: func() *corev1.Service {
			s := newService(corev1.ServiceTypeClusterIP)
			s.Spec.ClusterIP = "10.0.0.5"
			return s
		}, want: familyResult{clusterIP: "10.0.0.5", clusterIPs: []string{"10.0.0.5"}, policy: single, families: []corev1.IPFamily{v4}}},
		{name: "headless selectorless", svc: func() *corev1.Service {
			s := newService(corev1.ServiceTypeClusterIP)
			s.Spec.ClusterIP, s.Spec.Selector = "None", nil
			return s
		}, want: familyResult{clusterIP: "None", clusterIPs: []string{"None"}, policy: require, families: []corev1.IPFamily{v4, v6}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.svc()
			ServiceOnRead(s, cfgV4)
			checkFamilies(t, s, nil, tc.want)
		})
	}
	t.Run("ExternalName loses internalTrafficPolicy", func(t *testing.T) {
		s := newService(corev1.ServiceTypeExternalName)
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyCluster)
		ServiceOnRead(s, cfgV4)
		expect(t, "internalTrafficPolicy", s.Spec.InternalTrafficPolicy, (*corev1.ServiceInternalTrafficPolicy)(nil))
	})
}
