package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestValidateServiceUpdate(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	single, prefer, require := corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack
	dualService := func() *corev1.Service {
		s := clusterIPService()
		setIPs("10.0.0.10", "fd00::10")(s)
		setFamilies(require, v4, v6)(s)
		return s
	}
	cases := []struct {
		name string
		old  func() *corev1.Service
		edit func(*corev1.Service)
		cfg  *ServiceConfig
		want []wantErr
	}{
		{name: "no change"},
		{name: "resourceVersion required", edit: func(s *corev1.Service) { s.ResourceVersion = "" },
			want: []wantErr{e("metadata.resourceVersion", tInvalid, "must be specified for an update")}},
		{name: "name immutable", edit: func(s *corev1.Service) { s.Name = "other" },
			want: []wantErr{e("metadata.name", tInvalid, "field is immutable")}},
		{name: "clusterIP immutable", edit: setIPs("10.0.0.11"),
			want: []wantErr{e("spec.clusterIPs[0]", tInvalid, "may not change once set")}},
		{name: "to ExternalName drops cluster IP", edit: func(s *corev1.Service) {
			*s = *externalNameService()
			s.Name = "web"
		}},
		{name: "from ExternalName gets cluster IP", old: externalNameService, edit: func(s *corev1.Service) {
			*s = *clusterIPService()
			s.Name = "ext"
		}},
		{name: "headless stays headless", old: func() *corev1.Service { s := clusterIPService(); headless(s); return s },
			edit: both(headless, setFamilies(single, v4))},
		{name: "upgrade to dual-stack", cfg: &cfgDual, edit: both(setIPs("10.0.0.10", "fd00::10"), setFamilies(prefer, v4, v6))},
		{name: "upgrade may not change primary", cfg: &cfgDual, edit: both(setIPs("10.0.0.11", "fd00::10"), setFamilies(prefer, v4, v6)),
			want: []wantErr{e("spec.clusterIPs[0]", tInvalid, "may not change once set")}},
		{name: "downgrade needs SingleStack", old: dualService, cfg: &cfgDual, edit: both(setIPs("10.0.0.10"), setFamilies(require, v4)),
			want: []wantErr{
				e("spec.ipFamilyPolicy", tInvalid, "must be set to 'SingleStack' when releasing the secondary clusterIP"),
				e("spec.ipFamilyPolicy", tInvalid, "must be set to 'SingleStack' when releasing the secondary ipFamily"),
			}},
		{name: "downgrade with SingleStack", old: dualService, cfg: &cfgDual, edit: both(setIPs("10.0.0.10"), setFamilies(single, v4))},
		{name: "primary family immutable", old: dualService, cfg: &cfgDual, edit: both(setIPs("fd00::10"), setFamilies(single, v6)),
			want: []wantErr{
				e("spec.clusterIPs[0]", tInvalid, "may not change once set"),
				e("spec.ipFamilies[0]", tInvalid, "may not change once set"),
			}},
		{name: "PreferDualStack kept after cluster became single-stack", old: func() *corev1.Service {
			s := dualService()
			s.Spec.IPFamilyPolicy = &prefer
			return s
		}, edit: setFamilies(prefer, v4, v6)},
		{name: "loadBalancerClass immutable", old: func() *corev1.Service {
			s := loadBalancerService()
			s.Spec.LoadBalancerClass = ptr("example.com/a")
			return s
		}, edit: func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/b") },
			want: []wantErr{e("spec.loadBalancerClass", tInvalid, "may not change once set")}},
		{name: "loadBalancerClass dropped with type", old: func() *corev1.Service {
			s := loadBalancerService()
			s.Spec.LoadBalancerClass = ptr("example.com/a")
			return s
		}, edit: func(s *corev1.Service) {
			s.Spec.Type, s.Spec.LoadBalancerClass, s.Spec.AllocateLoadBalancerNodePorts = corev1.ServiceTypeNodePort, nil, nil
		}},
		{name: "healthCheckNodePort immutable", old: localLoadBalancer, edit: func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30101 },
			want: []wantErr{e("spec.healthCheckNodePort", tForbidden, "field is immutable")}},
		{name: "stored non-strict externalIP is kept", old: func() *corev1.Service {
			s := clusterIPService()
			s.Spec.ExternalIPs = []string{"192.0.02.10"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			return s
		}},
		{name: "new non-strict externalIP is refused", edit: func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"192.0.02.10"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}, want: []wantErr{e("spec.externalIPs[0]", tInvalid, "must not have leading 0s")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldFn := tc.old
			if oldFn == nil {
				oldFn = clusterIPService
			}
			old := oldFn()
			svc := old.DeepCopy()
			if tc.edit != nil {
				tc.edit(svc)
			}
			cfg := cfgV4
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			checkErrs(t, ValidateServiceUpdate(svc, old, cfg), tc.want...)
		})
	}
}

func localLoadBalancer() *corev1.Service {
	s := loadBalancerService()
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 30100
	return s
}

func TestValidateServiceStatusUpdate(t *testing.T) {
	vip, proxy := corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy
	ingress := func(ing ...corev1.LoadBalancerIngress) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Status.LoadBalancer.Ingress = ing }
	}
	cases := []struct {
		name string
		old  func() *corev1.Service
		edit func(*corev1.Service)
		want []wantErr
	}{
		{name: "ip with VIP mode", edit: ingress(corev1.LoadBalancerIngress{IP: "192.0.2.1", IPMode: &vip})},
		{name: "ip with Proxy mode", edit: ingress(corev1.LoadBalancerIngress{IP: "2001:db8::1", IPMode: &proxy})},
		{name: "hostname", edit: ingress(corev1.LoadBalancerIngress{Hostname: "lb.example.com"})},
		{name: "ip needs mode", edit: ingress(corev1.LoadBalancerIngress{IP: "192.0.2.1"}),
			want: []wantErr{e("status.loadBalancer.ingress[0].ipMode", tRequired, "must be specified when `ip` is set")}},
		{name: "mode needs ip", edit: ingress(corev1.LoadBalancerIngress{Hostname: "lb.example.com", IPMode: &vip}),
			want: []wantErr{e("status.loadBalancer.ingress[0].ipMode", tForbidden, "may not be specified when `ip` is not set")}},
		{name: "unknown mode", edit: ingress(corev1.LoadBalancerIngress{IP: "192.0.2.1", IPMode: ptr(corev1.LoadBalancerIPMode("DSR"))}),
			want: []wantErr{e("status.loadBalancer.ingress[0].ipMode", tNotSupported, `"Proxy", "VIP"`)}},
		{name: "invalid ip", edit: ingress(corev1.LoadBalancerIngress{IP: "192.0.2", IPMode: &vip}),
			want: []wantErr{e("status.loadBalancer.ingress[0].ip", tInvalid, "must be a valid IP address")}},
		{name: "hostname that is an IP", edit: ingress(corev1.LoadBalancerIngress{Hostname: "192.0.2.1"}),
			want: []wantErr{e("status.loadBalancer.ingress[0].hostname", tInvalid, "must be a DNS name, not an IP address")}},
		{name: "ingress on ClusterIP", old: clusterIPService, edit: ingress(corev1.LoadBalancerIngress{IP: "192.0.2.1", IPMode: &vip}),
			want: []wantErr{e("status.loadBalancer.ingress", tForbidden, "may only be used when `spec.type` is 'LoadBalancer'")}},
		{name: "status update checks metadata", edit: func(s *corev1.Service) { s.ResourceVersion = "" },
			want: []wantErr{e("metadata.resourceVersion", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldFn := tc.old
			if oldFn == nil {
				oldFn = loadBalancerService
			}
			old := oldFn()
			svc := old.DeepCopy()
			tc.edit(svc)
			checkErrs(t, ValidateServiceStatusUpdate(svc, old), tc.want...)
		})
	}
}
