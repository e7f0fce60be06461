package svcconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestKeepsPreferDualStack(t *testing.T) {
	prefer, single := corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicySingleStack
	svc := func(typ corev1.ServiceType, policy *corev1.IPFamilyPolicy, ips ...string) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, IPFamilyPolicy: policy, ClusterIPs: ips}}
		for _, ip := range ips {
			fam := corev1.IPv4Protocol
			if len(ip) > 0 && ip[0] == 'f' {
				fam = corev1.IPv6Protocol
			}
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, fam)
		}
		return s
	}
	cases := []struct {
		name     string
		svc, old *corev1.Service
		want     bool
	}{
		{"a create", svc(corev1.ServiceTypeClusterIP, &prefer, "10.0.0.1"), nil, false},
		{"unchanged PreferDualStack", svc(corev1.ServiceTypeNodePort, &prefer, "10.0.0.1", "fd00::1"), svc(corev1.ServiceTypeNodePort, &prefer, "10.0.0.1", "fd00::1"), true},
		{"policy unset before", svc(corev1.ServiceTypeClusterIP, &prefer, "10.0.0.1"), svc(corev1.ServiceTypeClusterIP, nil, "10.0.0.1"), true},
		{"an IP dropped", svc(corev1.ServiceTypeClusterIP, &prefer, "10.0.0.1"), svc(corev1.ServiceTypeClusterIP, &prefer, "10.0.0.1", "fd00::1"), false},
		{"type changed", svc(corev1.ServiceTypeNodePort, &prefer, "10.0.0.1"), svc(corev1.ServiceTypeClusterIP, &prefer, "10.0.0.1"), false},
		{"a type without cluster IPs", svc(corev1.ServiceTypeExternalName, &prefer), svc(corev1.ServiceTypeExternalName, &prefer), false},
		{"SingleStack", svc(corev1.ServiceTypeClusterIP, &single, "10.0.0.1"), svc(corev1.ServiceTypeClusterIP, &single, "10.0.0.1"), false},
		{"was SingleStack", svc(corev1.ServiceTypeClusterIP, &prefer, "10.0.0.1"), svc(corev1.ServiceTypeClusterIP, &single, "10.0.0.1"), false},
		{"policy unset now", svc(corev1.ServiceTypeClusterIP, nil, "10.0.0.1"), svc(corev1.ServiceTypeClusterIP, &prefer, "10.0.0.1"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeepsPreferDualStack(tc.svc, tc.old); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
