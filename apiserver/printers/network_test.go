package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

func TestServiceRows(t *testing.T) {
	cases := []rowCase{
		{
			name: "cluster IP with selector",
			obj: &corev1.Service{
				ObjectMeta: objectMeta("kubernetes", 3*time.Hour),
				Spec: corev1.ServiceSpec{
					Type:       corev1.ServiceTypeClusterIP,
					ClusterIP:  "10.96.0.1",
					ClusterIPs: []string{"10.96.0.1", "fd00:10:96::1"},
					Ports:      []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP}},
					Selector:   map[string]string{"app": "web", "tier": "front"},
				},
			},
			want: []any{"kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP", "3h", "app=web,tier=front"},
		},
		{
			name: "node port",
			obj: &corev1.Service{
				ObjectMeta: objectMeta("web", 10*time.Minute),
				Spec: corev1.ServiceSpec{
					Type:       corev1.ServiceTypeNodePort,
					ClusterIPs: []string{"10.96.0.20"},
					Ports: []corev1.ServicePort{
						{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP},
						{Port: 443, Protocol: corev1.ProtocolTCP},
						{Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP},
					},
					ExternalIPs: []string{"198.51.100.7"},
				},
			},
			want: []any{"web", "NodePort", "10.96.0.20", "198.51.100.7", "80:30080/TCP,443/TCP,53:30053/UDP", "10m", "<none>"},
		},
		{
			name: "load balancer pending",
			obj: &corev1.Service{
				ObjectMeta: objectMeta("lb", time.Minute),
				Spec: corev1.ServiceSpec{
					Type:       corev1.ServiceTypeLoadBalancer,
					ClusterIPs: []string{"10.96.0.30"},
					Ports:      []corev1.ServicePort{{Port: 80, NodePort: 31000, Protocol: corev1.ProtocolTCP}},
				},
			},
			want: []any{"lb", "LoadBalancer", "10.96.0.30", "<pending>", "80:31000/TCP", "60s", "<none>"},
		},
		{
			name: "load balancer with ingress points and external IPs",
			obj: &corev1.Service{
				ObjectMeta: objectMeta("lb2", time.Minute),
				Spec: corev1.ServiceSpec{
					Type:        corev1.ServiceTypeLoadBalancer,
					ClusterIPs:  []string{"10.96.0.31"},
					Ports:       []corev1.ServicePort{{Port: 80, NodePort: 31001, Protocol: corev1.ProtocolTCP}},
					ExternalIPs: []string{"198.51.100.9"},
				},
				Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
					{IP: "203.0.113.5"}, {Hostname: "lb.example.com"}, {IP: "203.0.113.1"}, {IP: "203.0.113.5"},
				}}},
			},
			want: []any{"lb2", "LoadBalancer", "10.96.0.31", "203.0.113.1,203.0.113.5,lb.example.com,198.51.100.9", "80:31001/TCP", "60s", "<none>"},
		},
		{
			name: "external name",
			obj: &corev1.Service{
				ObjectMeta: objectMeta("db", time.Hour),
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
			},
			want: []any{"db", "ExternalName", "<none>", "db.example.com", "<none>", "60m", "<none>"},
		},
		{
			name: "headless without ports",
			obj: &corev1.Service{
				ObjectMeta: objectMeta("headless", time.Hour),
				Spec: corev1.ServiceSpec{
					Type:       corev1.ServiceTypeClusterIP,
					ClusterIP:  corev1.ClusterIPNone,
					ClusterIPs: []string{corev1.ClusterIPNone},
					Selector:   map[string]string{"app": "db"},
				},
			},
			want: []any{"headless", "ClusterIP", "None", "<none>", "<none>", "60m", "app=db"},
		},
	}
	runRowCases(t, gr("", "services"), cases)
}

func addresses(ips ...string) []corev1.EndpointAddress {
	var as []corev1.EndpointAddress
	for _, ip := range ips {
		as = append(as, corev1.EndpointAddress{IP: ip})
	}
	return as
}

func TestEndpointsRows(t *testing.T) {
	cases := []rowCase{
		{
			name: "more than three addresses",
			obj: &corev1.Endpoints{
				ObjectMeta: objectMeta("web", time.Hour),
				Subsets: []corev1.EndpointSubset{{
					Addresses: addresses("10.244.0.1", "10.244.0.2", "10.244.0.3", "10.244.0.4", "10.244.0.5"),
					Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080}},
				}},
			},
			want: []any{"web", "10.244.0.1:8080,10.244.0.2:8080,10.244.0.3:8080 + 2 more...", "60m"},
		},
		{
			name: "every port of every address counts",
			obj: &corev1.Endpoints{
				ObjectMeta: objectMeta("dual", time.Hour),
				Subsets: []corev1.EndpointSubset{{
					Addresses: addresses("10.244.0.1", "fd00::1"),
					Ports:     []corev1.EndpointPort{{Name: "http", Port: 80}, {Name: "https", Port: 443}},
				}},
			},
			want: []any{"dual", "10.244.0.1:80,[fd00::1]:80,10.244.0.1:443 + 1 more...", "60m"},
		},
		{
			name: "headless without ports",
			obj: &corev1.Endpoints{
				ObjectMeta: objectMeta("headless", time.Hour),
				Subsets:    []corev1.EndpointSubset{{Addresses: addresses("10.244.0.7")}},
			},
			want: []any{"headless", "10.244.0.7", "60m"},
		},
		{
			name: "no subsets",
			obj:  &corev1.Endpoints{ObjectMeta: objectMeta("empty", time.Hour)},
			want: []any{"empty", "<none>", "60m"},
		},
		{
			name: "only not-ready addresses",
			obj: &corev1.Endpoints{
				ObjectMeta: objectMeta("starting", time.Hour),
				Subsets: []corev1.EndpointSubset{{
					NotReadyAddresses: addresses("10.244.0.9"),
					Ports:             []corev1.EndpointPort{{Port: 80}},
				}},
			},
			want: []any{"starting", "", "60m"},
		},
	}
	runRowCases(t, gr("", "endpoints"), cases)
}

func TestEndpointSliceRows(t *testing.T) {
	cases := []rowCase{
		{
			name: "ports and endpoints past three",
			obj: &discoveryv1.EndpointSlice{
				ObjectMeta:  objectMeta("web-abc12", 10*time.Minute),
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports: []discoveryv1.EndpointPort{
					{Name: ptr("http"), Port: ptr(int32(80))},
					{Name: ptr("named-only")},
					{},
					{Port: ptr(int32(9090))},
				},
				Endpoints: []discoveryv1.Endpoint{
					{Addresses: []string{"10.244.0.1"}},
					{Addresses: []string{"10.244.0.2", "10.244.0.3"}},
					{Addresses: []string{"10.244.0.4"}},
				},
			},
			want: []any{"web-abc12", "IPv4", "80,named-only,* + 1 more...", "10.244.0.1,10.244.0.2,10.244.0.3 + 1 more...", "10m"},
		},
		{
			name: "empty slice",
			obj: &discoveryv1.EndpointSlice{
				ObjectMeta:  objectMeta("empty-xyz", time.Hour),
				AddressType: discoveryv1.AddressTypeIPv6,
			},
			want: []any{"empty-xyz", "IPv6", "<unset>", "<unset>", "60m"},
		},
	}
	runRowCases(t, gr("discovery.k8s.io", "endpointslices"), cases)
}

func TestIngressRows(t *testing.T) {
	cases := []rowCase{
		{
			name: "class, hosts, address and TLS",
			obj: &networkingv1.Ingress{
				ObjectMeta: objectMeta("site", time.Hour),
				Spec: networkingv1.IngressSpec{
					IngressClassName: ptr("nginx"),
					Rules:            []networkingv1.IngressRule{{Host: "a.example.com"}, {Host: "b.example.com"}},
					TLS:              []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}}},
				},
				Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
					Ingress: []networkingv1.IngressLoadBalancerIngress{{Hostname: "lb.example.com"}, {IP: "203.0.113.20"}},
				}},
			},
			want: []any{"site", "nginx", "a.example.com,b.example.com", "203.0.113.20,lb.example.com", "80, 443", "60m"},
		},
		{
			name: "no class, no hosts, no address",
			obj: &networkingv1.Ingress{
				ObjectMeta: objectMeta("catchall", time.Hour),
				Spec:       networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{}}},
			},
			want: []any{"catchall", "<none>", "*", "", "80", "60m"},
		},
		{
			name: "more than three hosts counts rules",
			obj: &networkingv1.Ingress{
				ObjectMeta: objectMeta("many", time.Hour),
				Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
					{Host: "a.example.com"}, {}, {Host: "b.example.com"}, {Host: "c.example.com"}, {Host: "d.example.com"},
				}},
			},
			want: []any{"many", "<none>", "a.example.com,b.example.com,c.example.com + 2 more...", "", "80", "60m"},
		},
	}
	runRowCases(t, gr("networking.k8s.io", "ingresses"), cases)
}

func TestIngressClassRows(t *testing.T) {
	cases := []rowCase{
		{
			name: "parameters in an API group",
			obj: &networkingv1.IngressClass{
				ObjectMeta: objectMeta("external-lb", time.Hour),
				Spec: networkingv1.IngressClassSpec{
					Controller: "example.com/ingress-controller",
					Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"},
				},
			},
			want: []any{"external-lb", "example.com/ingress-controller", "IngressParameters.k8s.example.com/external-lb", "60m"},
		},
		{
			name: "core group parameters",
			obj: &networkingv1.IngressClass{
				ObjectMeta: objectMeta("cm", time.Hour),
				Spec: networkingv1.IngressClassSpec{
					Controller: "k8s.io/ingress-nginx",
					Parameters: &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "nginx-params"},
				},
			},
			want: []any{"cm", "k8s.io/ingress-nginx", "ConfigMap/nginx-params", "60m"},
		},
		{
			name: "no parameters",
			obj: &networkingv1.IngressClass{
				ObjectMeta: objectMeta("nginx", time.Hour),
				Spec:       networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
			},
			want: []any{"nginx", "k8s.io/ingress-nginx", "<none>", "60m"},
		},
	}
	runRowCases(t, gr("networking.k8s.io", "ingressclasses"), cases)
}
