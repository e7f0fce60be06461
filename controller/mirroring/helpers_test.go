package mirroring

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Builders for test objects.

func endpointsObj(name string, subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-ep-" + name),
			Labels: map[string]string{"team": "a"}},
		Subsets: subsets,
	}
}

func subset(ready, notReady []string, ports ...corev1.EndpointPort) corev1.EndpointSubset {
	s := corev1.EndpointSubset{Ports: ports}
	for _, ip := range ready {
		s.Addresses = append(s.Addresses, corev1.EndpointAddress{IP: ip})
	}
	for _, ip := range notReady {
		s.NotReadyAddresses = append(s.NotReadyAddresses, corev1.EndpointAddress{IP: ip})
	}
	return s
}

func tcp(name string, port int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

func selectorless(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
		}}},
	}
}

// render prints slices compactly:
// "IPv4 [https:443/TCP] 192.0.2.1(ready) 192.0.2.2(notready)".
func render(slices []*discoveryv1.EndpointSlice) string {
	var parts []string
	for _, s := range slices {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, "")))
		}
		part := fmt.Sprintf("%s [%s]", s.AddressType, strings.Join(ports, ","))
		for _, e := range s.Endpoints {
			state := "notready"
			if ptr.Deref(e.Conditions.Ready, true) {
				state = "ready"
			}
			part += fmt.Sprintf(" %s(%s)", strings.Join(e.Addresses, ","), state)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, " | ")
}
