package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	tInvalid      = field.ErrorTypeInvalid
	tRequired     = field.ErrorTypeRequired
	tForbidden    = field.ErrorTypeForbidden
	tNotSupported = field.ErrorTypeNotSupported
	tDuplicate    = field.ErrorTypeDuplicate
	tTooMany      = field.ErrorTypeTooMany
	tInternal     = field.ErrorTypeInternal
)

// clusterIPService is a valid, fully defaulted single-stack ClusterIP Service.
func clusterIPService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeClusterIP,
			ClusterIP:             "10.0.0.10",
			ClusterIPs:            []string{"10.0.0.10"},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:        ptr(corev1.IPFamilyPolicySingleStack),
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
			Selector:              map[string]string{"app": "web"},
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

func nodePortService() *corev1.Service {
	svc := clusterIPService()
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	return svc
}

func loadBalancerService() *corev1.Service {
	svc := nodePortService()
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.AllocateLoadBalancerNodePorts = ptr(true)
	return svc
}

func externalNameService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "default", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeExternalName,
			ExternalName:    "db.example.com",
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
}

func headless(svc *corev1.Service) {
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
}

func twoPorts(svc *corev1.Service) {
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8443)})
}

type serviceCase struct {
	name string
	base func() *corev1.Service
	cfg  *ServiceConfig
	edit func(*corev1.Service)
	want []wantErr
}

func runServiceCases(t *testing.T, cases []serviceCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base
			if base == nil {
				base = clusterIPService
			}
			svc := base()
			if tc.edit != nil {
				tc.edit(svc)
			}
			cfg := cfgV4
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			checkErrs(t, ValidateService(svc, cfg), tc.want...)
		})
	}
}

func TestValidateServiceMetadataAndType(t *testing.T) {
	const dns1035Msg = `a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`
	runServiceCases(t, []serviceCase{
		{name: "valid ClusterIP"},
		{name: "valid NodePort", base: nodePortService},
		{name: "valid LoadBalancer", base: loadBalancerService},
		{name: "valid ExternalName", base: externalNameService},
		{name: "name not a DNS-1035 label", edit: func(s *corev1.Service) { s.Name = "Bad_Name" },
			want: []wantErr{e("metadata.name", tInvalid, dns1035Msg)}},
		{name: "name starting with a digit", edit: func(s *corev1.Service) { s.Name = "1web" },
			want: []wantErr{e("metadata.name", tInvalid, "DNS-1035")}},
		{name: "namespace required", edit: func(s *corev1.Service) { s.Namespace = "" },
			want: []wantErr{e("metadata.namespace", tRequired)}},
		{name: "unqualified non-standard finalizer", edit: func(s *corev1.Service) { s.Finalizers = []string{"mine"} },
			want: []wantErr{e("metadata.finalizers[0]", tInvalid, "neither a standard finalizer name")}},
		{name: "type required", edit: func(s *corev1.Service) { s.Spec.Type = "" },
			want: []wantErr{e("spec.type", tRequired)}},
		{name: "type unknown", edit: func(s *corev1.Service) { s.Spec.Type = "Magic" },
			want: []wantErr{e("spec.type", tNotSupported, `"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`)}},
		{name: "selector label invalid", edit: func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "bad value"} },
			want: []wantErr{e("spec.selector", tInvalid)}},
		{name: "topology annotations disagree", edit: func(s *corev1.Service) {
			s.Annotations = map[string]string{corev1.AnnotationTopologyMode: "Auto", corev1.DeprecatedAnnotationTopologyAwareHints: "Disabled"}
		}, want: []wantErr{e("metadata.annotations[service.kubernetes.io/topology-mode]", tInvalid, "must match")}},
		{name: "topology annotations agree", edit: func(s *corev1.Service) {
			s.Annotations = map[string]string{corev1.AnnotationTopologyMode: "Auto", corev1.DeprecatedAnnotationTopologyAwareHints: "Auto"}
		}},
	})
}

func TestValidateServicePorts(t *testing.T) {
	setName := func(n string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.Ports[0].Name = n }
	}
	setTarget := func(p intstr.IntOrString) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = p }
	}
	runServiceCases(t, []serviceCase{
		{name: "port name 123-abc", edit: setName("123-abc")},
		{name: "port name web", edit: setName("web")},
		{name: "port name 123_abc", edit: setName("123_abc"), want: []wantErr{e("spec.ports[0].name", tInvalid, "RFC 1123 label")}},
		{name: "port name -web", edit: setName("-web"), want: []wantErr{e("spec.ports[0].name", tInvalid, "RFC 1123 label")}},
		{name: "ports required", edit: func(s *corev1.Service) { s.Spec.Ports = nil },
			want: []wantErr{e("spec.ports", tRequired)}},
		{name: "headless needs no ports", edit: func(s *corev1.Service) { headless(s); s.Spec.Ports = nil }},
		{name: "ExternalName needs no ports", base: externalNameService},
		{name: "names required with two ports", edit: func(s *corev1.Service) { twoPorts(s); s.Spec.Ports[1].Name = "" },
			want: []wantErr{e("spec.ports[1].name", tRequired)}},
		{name: "single port may be unnamed", edit: setName("")},
		{name: "duplicate port names", edit: func(s *corev1.Service) { twoPorts(s); s.Spec.Ports[1].Name = "http" },
			want: []wantErr{e("spec.ports[1].name", tDuplicate)}},
		{name: "duplicate port and protocol", edit: func(s *corev1.Service) { twoPorts(s); s.Spec.Ports[1].Port = 80 },
			want: []wantErr{e("spec.ports[1]", tDuplicate)}},
		{name: "same port other protocol", edit: func(s *corev1.Service) {
			twoPorts(s)
			s.Spec.Ports[1].Port, s.Spec.Ports[1].Protocol = 80, corev1.ProtocolUDP
		}},
		{name: "port zero", edit: func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 },
			want: []wantErr{e("spec.ports[0].port", tInvalid, "must be between 1 and 65535, inclusive")}},
		{name: "port too big", edit: func(s *corev1.Service) { s.Spec.Ports[0].Port = 65536 },
			want: []wantErr{e("spec.ports[0].port", tInvalid)}},
		{name: "protocol required", edit: func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "" },
			want: []wantErr{e("spec.ports[0].protocol", tRequired)}},
		{name: "protocol SCTP", edit: func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP }},
		{name: "protocol unknown", edit: func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "HTTP" },
			want: []wantErr{e("spec.ports[0].protocol", tNotSupported, `"SCTP", "TCP", "UDP"`)}},
		{name: "targetPort named", edit: setTarget(intstr.FromString("http-alt"))},
		{name: "targetPort zero", edit: setTarget(intstr.FromInt32(0)),
			want: []wantErr{e("spec.ports[0].targetPort", tInvalid)}},
		{name: "targetPort name too long", edit: setTarget(intstr.FromString("abcdefghijklmnop")),
			want: []wantErr{e("spec.ports[0].targetPort", tInvalid, "no more than 15 characters")}},
		{name: "targetPort name without letter", edit: setTarget(intstr.FromString("8080")),
			want: []wantErr{e("spec.ports[0].targetPort", tInvalid, "at least one letter")}},
		{name: "targetPort name double hyphen", edit: setTarget(intstr.FromString("a--b")),
			want: []wantErr{e("spec.ports[0].targetPort", tInvalid, "consecutive hyphens")}},
		{name: "targetPort name leading hyphen", edit: setTarget(intstr.FromString("-web")),
			want: []wantErr{e("spec.ports[0].targetPort", tInvalid, "begin or end with a hyphen")}},
		{name: "appProtocol qualified", edit: func(s *corev1.Service) { s.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c") }},
		{name: "appProtocol invalid", edit: func(s *corev1.Service) { s.Spec.Ports[0].AppProtocol = ptr("bad proto") },
			want: []wantErr{e("spec.ports[0].appProtocol", tInvalid)}},
		{name: "nodePort on ClusterIP", edit: func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			want: []wantErr{e("spec.ports[0].nodePort", tForbidden, "may not be used when `type` is 'ClusterIP'")}},
		{name: "duplicate nodePort", base: nodePortService, edit: func(s *corev1.Service) { twoPorts(s); s.Spec.Ports[1].NodePort = 30080 },
			want: []wantErr{e("spec.ports[1].nodePort", tDuplicate)}},
	})
}

func TestValidateServiceExternalNameAndAffinity(t *testing.T) {
	runServiceCases(t, []serviceCase{
		{name: "externalName required", base: externalNameService, edit: func(s *corev1.Service) { s.Spec.ExternalName = "" },
			want: []wantErr{e("spec.externalName", tRequired)}},
		{name: "externalName with trailing dot", base: externalNameService, edit: func(s *corev1.Service) { s.Spec.ExternalName = "db.example.com." }},
		{name: "externalName not a subdomain", base: externalNameService, edit: func(s *corev1.Service) { s.Spec.ExternalName = "db_1.example.com" },
			want: []wantErr{e("spec.externalName", tInvalid, "RFC 1123 subdomain")}},
		{name: "externalName with clusterIPs", base: externalNameService, edit: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.1", []string{"10.0.0.1"}
		}, want: []wantErr{e("spec.clusterIPs", tForbidden, "may not be set for ExternalName services")}},
		{name: "externalName with families", base: externalNameService, edit: func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
		}, want: []wantErr{e("spec.ipFamilies", tForbidden), e("spec.ipFamilyPolicy", tForbidden)}},
		{name: "sessionAffinity required", edit: func(s *corev1.Service) { s.Spec.SessionAffinity = "" },
			want: []wantErr{e("spec.sessionAffinity", tRequired)}},
		{name: "sessionAffinity unknown", edit: func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" },
			want: []wantErr{e("spec.sessionAffinity", tNotSupported, `"ClientIP", "None"`)}},
		{name: "ClientIP needs config", edit: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP },
			want: []wantErr{e("spec.sessionAffinityConfig", tRequired, "when session affinity type is ClientIP")}},
		{name: "ClientIP timeout ok", edit: clientIPTimeout(86400)},
		{name: "ClientIP timeout zero", edit: clientIPTimeout(0),
			want: []wantErr{e("spec.sessionAffinityConfig.clientIP.timeoutSeconds", tInvalid, "must be greater than 0 and less than 86400")}},
		{name: "ClientIP timeout too long", edit: clientIPTimeout(86401),
			want: []wantErr{e("spec.sessionAffinityConfig.clientIP.timeoutSeconds", tInvalid)}},
		{name: "None with config", edit: func(s *corev1.Service) { clientIPTimeout(10)(s); s.Spec.SessionAffinity = corev1.ServiceAffinityNone },
			want: []wantErr{e("spec.sessionAffinityConfig", tForbidden, "must not be set when session affinity is None")}},
	})
}

func clientIPTimeout(seconds int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &seconds}}
	}
}

func setIPs(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ips[0], ips
	}
}

func setFamilies(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, fams
	}
}

func both(fns ...func(*corev1.Service)) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, f := range fns {
			f(s)
		}
	}
}

func TestValidateServiceClusterIPs(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	single, require := corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyRequireDualStack
	runServiceCases(t, []serviceCase{
		{name: "dual-stack", cfg: &cfgDual, edit: both(setIPs("10.0.0.10", "fd00::10"), setFamilies(require, v4, v6))},
		{name: "IPv6 primary", cfg: &cfgDual, edit: both(setIPs("fd00::10"), setFamilies(single, v6))},
		{name: "clusterIPs must mirror clusterIP", edit: func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.0.0.11"} },
			want: []wantErr{e("spec.clusterIPs", tInvalid, "first value must match `clusterIP`")}},
		{name: "clusterIPs required with clusterIP", edit: func(s *corev1.Service) { s.Spec.ClusterIPs = nil },
			want: []wantErr{e("spec.clusterIPs", tRequired)}},
		{name: "clusterIPs without clusterIP", edit: func(s *corev1.Service) { s.Spec.ClusterIP = "" },
			want: []wantErr{e("spec.clusterIPs", tInvalid, "must be empty when `clusterIP` is not specified")}},
		{name: "unallocated is fine", edit: func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil }},
		{name: "invalid IP", edit: setIPs("10.0.0.300"),
			want: []wantErr{e("spec.clusterIPs[0]", tInvalid, "must be a valid IP address")}},
		{name: "IPv4 leading zeros", edit: setIPs("010.000.000.010"),
			want: []wantErr{e("spec.clusterIPs[0]", tInvalid, "must not have leading 0s")}},
		{name: "None then an IP", edit: setIPs("None", "10.0.0.10"),
			want: []wantErr{e("spec.clusterIPs", tInvalid, "'None' must be the first and only value")}},
		{name: "three IPs", cfg: &cfgDual, edit: both(setIPs("10.0.0.10", "fd00::10", "10.0.0.11"), setFamilies(require, v4, v6)),
			want: []wantErr{e("spec.clusterIPs", tInvalid, "may only hold up to 2 values")}},
		{name: "two IPv4", cfg: &cfgDual, edit: both(setIPs("10.0.0.10", "10.0.0.11"), setFamilies(require, v4, v6)),
			want: []wantErr{
				e("spec.clusterIPs", tInvalid, "may specify no more than one IP for each IP family"),
				e("spec.clusterIPs[1]", tInvalid, "expected an IPv6 value as indicated by `ipFamilies[1]`"),
			}},
		{name: "IP does not match family", cfg: &cfgDual, edit: setFamilies(single, v6),
			want: []wantErr{e("spec.clusterIPs[0]", tInvalid, "expected an IPv6 value as indicated by `ipFamilies[0]`")}},
		{name: "duplicate family", cfg: &cfgDual, edit: setFamilies(require, v4, v4),
			want: []wantErr{e("spec.ipFamilies[1]", tDuplicate)}},
		{name: "unknown family", edit: setFamilies(single, "IPv5"),
			want: []wantErr{e("spec.ipFamilies[0]", tNotSupported, `"IPv4", "IPv6"`)}},
		{name: "unknown policy", edit: setFamilies("Sometimes", v4),
			want: []wantErr{e("spec.ipFamilyPolicy", tNotSupported, `"PreferDualStack", "RequireDualStack", "SingleStack"`)}},
		{name: "RequireDualStack on single-stack cluster", edit: setFamilies(require, v4),
			want: []wantErr{e("spec.ipFamilyPolicy", tInvalid, "this cluster is not configured for dual-stack services")}},
		{name: "family not configured", edit: both(setIPs("fd00::10"), setFamilies(single, v6)),
			want: []wantErr{e("spec.ipFamilies[0]", tInvalid, "not configured on this cluster")}},
		{name: "headless selectorless may be dual on single-stack", edit: both(headless, setFamilies(require, v4, v6),
			func(s *corev1.Service) { s.Spec.Selector = nil })},
		{name: "headless NodePort", base: nodePortService, edit: headless,
			want: []wantErr{e("spec.clusterIPs[0]", tInvalid, "may not be set to 'None' for NodePort services")}},
		{name: "headless LoadBalancer", base: loadBalancerService, edit: headless,
			want: []wantErr{e("spec.clusterIPs[0]", tInvalid, "may not be set to 'None' for LoadBalancer services")}},
	})
}

func TestValidateServiceExternalAccess(t *testing.T) {
	withExternalIP := func(ip string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{ip}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}
	}
	runServiceCases(t, []serviceCase{
		{name: "externalIP", edit: withExternalIP("192.0.2.10")},
		{name: "externalIP invalid", edit: withExternalIP("192.0.2"),
			want: []wantErr{e("spec.externalIPs[0]", tInvalid, "must be a valid IP address")}},
		{name: "externalIP loopback", edit: withExternalIP("127.0.0.1"),
			want: []wantErr{e("spec.externalIPs[0]", tInvalid, "loopback")}},
		{name: "externalIP unspecified", edit: withExternalIP("::"),
			want: []wantErr{e("spec.externalIPs[0]", tInvalid, "may not be unspecified (::)")}},
		{name: "externalIP link-local", edit: withExternalIP("169.254.169.254"),
			want: []wantErr{e("spec.externalIPs[0]", tInvalid, "link-local range")}},
		{name: "externalIP link-local multicast", edit: withExternalIP("224.0.0.5"),
			want: []wantErr{e("spec.externalIPs[0]", tInvalid, "link-local multicast")}},
		{name: "externalIPs need externalTrafficPolicy", edit: func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.10"} },
			want: []wantErr{e("spec.externalTrafficPolicy", tRequired)}},
		{name: "externalTrafficPolicy on internal service", edit: func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, want: []wantErr{e("spec.externalTrafficPolicy", tInvalid, "may only be set for externally-accessible services")}},
		{name: "externalTrafficPolicy required on NodePort", base: nodePortService, edit: func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "" },
			want: []wantErr{e("spec.externalTrafficPolicy", tRequired)}},
		{name: "externalTrafficPolicy unknown", base: nodePortService, edit: func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "Global" },
			want: []wantErr{e("spec.externalTrafficPolicy", tNotSupported, `"Cluster", "Local"`)}},
		{name: "healthCheckNodePort on NodePort", base: nodePortService, edit: func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, 30100
		}, want: []wantErr{e("spec.healthCheckNodePort", tInvalid, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'")}},
		{name: "healthCheckNodePort required", base: loadBalancerService, edit: func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, want: []wantErr{e("spec.healthCheckNodePort", tRequired)}},
		{name: "healthCheckNodePort set", base: loadBalancerService, edit: func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, 30100
		}},
		{name: "healthCheckNodePort out of range", base: loadBalancerService, edit: func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, 70000
		}, want: []wantErr{e("spec.healthCheckNodePort", tInvalid, "must be between 1 and 65535")}},
		{name: "internalTrafficPolicy required", edit: func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = nil },
			want: []wantErr{e("spec.internalTrafficPolicy", tRequired)}},
		{name: "internalTrafficPolicy Local", edit: func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal) }},
		{name: "internalTrafficPolicy unknown", edit: func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicy("Node"))
		},
			want: []wantErr{e("spec.internalTrafficPolicy", tNotSupported, `"Cluster", "Local"`)}},
		{name: "trafficDistribution PreferClose", edit: trafficDistribution("PreferClose")},
		{name: "trafficDistribution PreferSameZone", edit: trafficDistribution("PreferSameZone")},
		{name: "trafficDistribution PreferSameNode", edit: trafficDistribution("PreferSameNode")},
		{name: "trafficDistribution unknown", edit: trafficDistribution("Nearest"),
			want: []wantErr{e("spec.trafficDistribution", tNotSupported, `"PreferClose", "PreferSameNode", "PreferSameZone"`)}},
	})
}

func trafficDistribution(v string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.TrafficDistribution = &v }
}

func TestValidateServiceLoadBalancer(t *testing.T) {
	sourceRanges := func(r ...string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = r }
	}
	sourceAnnotation := func(v string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{corev1.AnnotationLoadBalancerSourceRangesKey: v}
		}
	}
	const annPath = "metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]"
	runServiceCases(t, []serviceCase{
		{name: "source ranges", base: loadBalancerService, edit: sourceRanges("10.0.0.0/8", " 192.168.0.0/16 ")},
		{name: "source ranges on ClusterIP", edit: sourceRanges("10.0.0.0/8"),
			want: []wantErr{e("spec.LoadBalancerSourceRanges", tForbidden, "may only be used when `type` is 'LoadBalancer'")}},
		{name: "source range with host bits", base: loadBalancerService, edit: sourceRanges("10.0.0.1/8"),
			want: []wantErr{e("spec.LoadBalancerSourceRanges[0]", tInvalid, "must not have bits set beyond the prefix length")}},
		{name: "source range not a CIDR", base: loadBalancerService, edit: sourceRanges("10.0.0.0"),
			want: []wantErr{e("spec.LoadBalancerSourceRanges[0]", tInvalid, "must be a valid CIDR value")}},
		{name: "source ranges annotation", base: loadBalancerService, edit: sourceAnnotation("10.0.0.0/8, 192.168.0.0/16")},
		{name: "source ranges annotation on ClusterIP", edit: sourceAnnotation("10.0.0.0/8"),
			want: []wantErr{e(annPath, tForbidden)}},
		{name: "source ranges annotation invalid", base: loadBalancerService, edit: sourceAnnotation("10.0.0.0/8,nope"),
			want: []wantErr{e(annPath, tInvalid, "must be a valid CIDR value")}},
		{name: "allocateLoadBalancerNodePorts required", base: loadBalancerService, edit: func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = nil },
			want: []wantErr{e("allocateLoadBalancerNodePorts", tRequired)}},
		{name: "allocateLoadBalancerNodePorts on NodePort", base: nodePortService, edit: func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr(false) },
			want: []wantErr{e("spec.allocateLoadBalancerNodePorts", tForbidden)}},
		{name: "loadBalancerClass", base: loadBalancerService, edit: func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/lb") }},
		{name: "loadBalancerClass invalid", base: loadBalancerService, edit: func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/bad class") },
			want: []wantErr{e("spec.loadBalancerClass", tInvalid)}},
		{name: "loadBalancerClass on ClusterIP", edit: func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/lb") },
			want: []wantErr{e("spec.loadBalancerClass", tForbidden, "may only be used when `type` is 'LoadBalancer'")}},
		{name: "loadBalancerIP", base: loadBalancerService, edit: func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.1" }},
		{name: "loadBalancerIP invalid", base: loadBalancerService, edit: func(s *corev1.Service) { s.Spec.LoadBalancerIP = "lb.example.com" },
			want: []wantErr{e("spec.loadBalancerIP", tInvalid)}},
	})
}
