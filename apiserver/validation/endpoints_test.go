package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func validEndpoints() *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.1.0.5", NodeName: ptr("node-1"), Hostname: "web-0"}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

func TestValidateEndpoints(t *testing.T) {
	addr := func(ip string) func(*corev1.Endpoints) {
		return func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].IP = ip }
	}
	const ipPath = "subsets[0].addresses[0].ip"
	cases := []struct {
		name string
		edit func(*corev1.Endpoints)
		want []wantErr
	}{
		{name: "valid"},
		{name: "IPv6 address", edit: addr("2001:db8::5")},
		{name: "not-ready only", edit: func(ep *corev1.Endpoints) {
			ep.Subsets[0].NotReadyAddresses, ep.Subsets[0].Addresses = ep.Subsets[0].Addresses, nil
		}},
		{name: "no addresses", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses = nil },
			want: []wantErr{e("subsets[0]", tRequired, "must specify `addresses` or `notReadyAddresses`")}},
		{name: "headless needs no ports", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports = nil }},
		{name: "invalid IP", edit: addr("10.1.0"), want: []wantErr{e(ipPath, tInvalid, "must be a valid IP address")}},
		{name: "loopback IP", edit: addr("127.0.0.1"), want: []wantErr{e(ipPath, tInvalid, "loopback range")}},
		{name: "IPv6 loopback", edit: addr("::1"), want: []wantErr{e(ipPath, tInvalid, "loopback range")}},
		{name: "unspecified IP", edit: addr("0.0.0.0"), want: []wantErr{e(ipPath, tInvalid, "may not be unspecified (0.0.0.0)")}},
		{name: "link-local IP", edit: addr("fe80::1"), want: []wantErr{e(ipPath, tInvalid, "link-local range")}},
		{name: "link-local multicast IP", edit: addr("224.0.0.251"), want: []wantErr{e(ipPath, tInvalid, "link-local multicast range")}},
		{name: "non-link-local multicast IP", edit: addr("239.1.1.1")},
		{name: "hostname not a label", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].Hostname = "web.0" },
			want: []wantErr{e("subsets[0].addresses[0].hostname", tInvalid, "must not contain dots")}},
		{name: "nodeName invalid", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].NodeName = ptr("Node_1") },
			want: []wantErr{e("subsets[0].addresses[0].nodeName", tInvalid)}},
		{name: "port zero", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Port = 0 },
			want: []wantErr{e("subsets[0].ports[0].port", tInvalid, "must be between 1 and 65535")}},
		{name: "port protocol required", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Protocol = "" },
			want: []wantErr{e("subsets[0].ports[0].protocol", tRequired)}},
		{name: "port protocol unknown", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Protocol = "ICMP" },
			want: []wantErr{e("subsets[0].ports[0].protocol", tNotSupported)}},
		{name: "port name 123-abc", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Name = "123-abc" }},
		{name: "port name -web", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].Name = "-web" },
			want: []wantErr{e("subsets[0].ports[0].name", tInvalid)}},
		{name: "port names required with two ports", edit: func(ep *corev1.Endpoints) {
			ep.Subsets[0].Ports = append(ep.Subsets[0].Ports, corev1.EndpointPort{Port: 8443, Protocol: corev1.ProtocolTCP})
		}, want: []wantErr{e("subsets[0].ports[1].name", tRequired)}},
		{name: "appProtocol invalid", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports[0].AppProtocol = ptr("not valid") },
			want: []wantErr{e("subsets[0].ports[0].appProtocol", tInvalid)}},
		{name: "name invalid", edit: func(ep *corev1.Endpoints) { ep.Name = "Web" },
			want: []wantErr{e("metadata.name", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := validEndpoints()
			if tc.edit != nil {
				tc.edit(ep)
			}
			checkErrs(t, ValidateEndpoints(ep), tc.want...)
		})
	}
}

func TestValidateEndpointsUpdate(t *testing.T) {
	old := validEndpoints()
	old.Subsets[0].Addresses[0].IP = "10.001.0.5" // stored before strict validation
	cases := []struct {
		name string
		edit func(*corev1.Endpoints)
		want []wantErr
	}{
		{name: "stored non-strict IP kept", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].NodeName = ptr("node-2") }},
		{name: "new non-strict IP refused", edit: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].IP = "10.002.0.5" },
			want: []wantErr{e("subsets[0].addresses[0].ip", tInvalid, "must not have leading 0s")}},
		{name: "resourceVersion required", edit: func(ep *corev1.Endpoints) { ep.ResourceVersion = "" },
			want: []wantErr{e("metadata.resourceVersion", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := old.DeepCopy()
			tc.edit(ep)
			checkErrs(t, ValidateEndpointsUpdate(ep, old), tc.want...)
		})
	}
}

func validSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc12", Namespace: "default", ResourceVersion: "1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"10.1.0.5"},
			NodeName:  ptr("node-1"),
			Zone:      ptr("zone-a"),
			Hostname:  ptr("web-0"),
			Hints: &discoveryv1.EndpointHints{
				ForZones: []discoveryv1.ForZone{{Name: "zone-a"}},
				ForNodes: []discoveryv1.ForNode{{Name: "node-1"}},
			},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
}

func TestValidateEndpointSlice(t *testing.T) {
	setAddr := func(t discoveryv1.AddressType, a ...string) func(*discoveryv1.EndpointSlice) {
		return func(es *discoveryv1.EndpointSlice) { es.AddressType, es.Endpoints[0].Addresses = t, a }
	}
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	cases := []struct {
		name string
		edit func(*discoveryv1.EndpointSlice)
		want []wantErr
	}{
		{name: "valid IPv4"},
		{name: "valid IPv6", edit: setAddr(discoveryv1.AddressTypeIPv6, "2001:db8::5")},
		{name: "valid FQDN", edit: setAddr(discoveryv1.AddressTypeFQDN, "db.example.com")},
		{name: "addressType required", edit: func(es *discoveryv1.EndpointSlice) { es.AddressType = "" },
			want: []wantErr{e("addressType", tRequired)}},
		{name: "addressType IP is deprecated", edit: func(es *discoveryv1.EndpointSlice) { es.AddressType = "IP" },
			want: []wantErr{e("addressType", tNotSupported, `"FQDN", "IPv4", "IPv6"`)}},
		{name: "IPv6 in IPv4 slice", edit: setAddr(discoveryv1.AddressTypeIPv4, "2001:db8::5"),
			want: []wantErr{e("endpoints[0].addresses[0]", tInvalid, "must be an IPv4 address")}},
		{name: "IPv4 in IPv6 slice", edit: setAddr(discoveryv1.AddressTypeIPv6, "10.1.0.5"),
			want: []wantErr{e("endpoints[0].addresses[0]", tInvalid, "must be an IPv6 address")}},
		{name: "loopback", edit: setAddr(discoveryv1.AddressTypeIPv4, "127.0.0.2"),
			want: []wantErr{e("endpoints[0].addresses[0]", tInvalid, "loopback")}},
		{name: "link-local", edit: setAddr(discoveryv1.AddressTypeIPv6, "fe80::1"),
			want: []wantErr{e("endpoints[0].addresses[0]", tInvalid, "link-local")}},
		{name: "unspecified", edit: setAddr(discoveryv1.AddressTypeIPv4, "0.0.0.0"),
			want: []wantErr{e("endpoints[0].addresses[0]", tInvalid, "unspecified")}},
		{name: "FQDN invalid", edit: setAddr(discoveryv1.AddressTypeFQDN, "db"),
			want: []wantErr{e("endpoints[0].addresses[0]", tInvalid, "at least two segments")}},
		{name: "no addresses", edit: setAddr(discoveryv1.AddressTypeIPv4),
			want: []wantErr{e("endpoints[0].addresses", tRequired, "must contain at least 1 address")}},
		{name: "100 addresses", edit: setAddr(discoveryv1.AddressTypeIPv4, many(100, func(i int) string { return "10.1.0." + itoa(i+1) })...)},
		{name: "101 addresses", edit: setAddr(discoveryv1.AddressTypeIPv4, many(101, func(i int) string { return "10.1.0." + itoa(i+1) })...),
			want: []wantErr{e("endpoints[0].addresses", tTooMany)}},
		{name: "1001 endpoints", edit: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints = make([]discoveryv1.Endpoint, 1001)
		}, want: []wantErr{e("endpoints", tTooMany)}},
		{name: "hostname not a label", edit: func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Hostname = ptr("web_0") },
			want: []wantErr{e("endpoints[0].hostname", tInvalid)}},
		{name: "nodeName invalid", edit: func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].NodeName = ptr("-node") },
			want: []wantErr{e("endpoints[0].nodeName", tInvalid)}},
		{name: "topology zone key reserved", edit: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelTopologyZone: "a"}
		}, want: []wantErr{e("endpoints[0].deprecatedTopology[topology.kubernetes.io/zone]", tInternal)}},
		{name: "too many zone hints", edit: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Hints.ForZones = make([]discoveryv1.ForZone, 9)
		}, want: []wantErr{e("endpoints[0].hints.forZones", tTooMany)}},
		{name: "duplicate zone hint", edit: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Hints.ForZones = []discoveryv1.ForZone{{Name: "a"}, {Name: "a"}}
		}, want: []wantErr{e("endpoints[0].hints.forZones[1].name", tDuplicate)}},
		{name: "zone hint not a label value", edit: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Hints.ForZones = []discoveryv1.ForZone{{Name: "zone a"}}
		}, want: []wantErr{e("endpoints[0].hints.forZones[0].name", tInvalid)}},
		{name: "too many node hints", edit: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Hints.ForNodes = make([]discoveryv1.ForNode, 9)
		}, want: []wantErr{e("endpoints[0].hints.forNodes", tTooMany)}},
		{name: "node hint invalid", edit: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Hints.ForNodes = []discoveryv1.ForNode{{Name: "Node_1"}}
		}, want: []wantErr{e("endpoints[0].hints.forNodes[0].name", tInvalid)}},
		{name: "port name 123-abc", edit: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Name = ptr("123-abc") }},
		{name: "port name 123_abc", edit: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Name = ptr("123_abc") },
			want: []wantErr{e("ports[0].name", tInvalid)}},
		{name: "duplicate port names", edit: func(es *discoveryv1.EndpointSlice) {
			es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(80)), Protocol: ptr(corev1.ProtocolTCP)})
		}, want: []wantErr{e("ports[1].name", tDuplicate)}},
		{name: "two unnamed ports are duplicates", edit: func(es *discoveryv1.EndpointSlice) {
			es.Ports = []discoveryv1.EndpointPort{{Name: ptr(""), Protocol: ptr(corev1.ProtocolTCP)}, {Name: ptr(""), Protocol: ptr(corev1.ProtocolUDP)}}
		}, want: []wantErr{e("ports[1].name", tDuplicate)}},
		{name: "port protocol required", edit: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Protocol = nil },
			want: []wantErr{e("ports[0].protocol", tRequired)}},
		{name: "port protocol unknown", edit: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Protocol = ptr(corev1.Protocol("QUIC")) },
			want: []wantErr{e("ports[0].protocol", tNotSupported)}},
		{name: "port appProtocol invalid", edit: func(es *discoveryv1.EndpointSlice) { es.Ports[0].AppProtocol = ptr("a b") },
			want: []wantErr{e("ports[0].appProtocol", tInvalid)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es := validSlice()
			if tc.edit != nil {
				tc.edit(es)
			}
			checkErrs(t, ValidateEndpointSlice(es), tc.want...)
		})
	}
}

func TestValidateEndpointSliceUpdate(t *testing.T) {
	old := validSlice()
	changed := old.DeepCopy()
	changed.AddressType = discoveryv1.AddressTypeIPv6
	changed.Endpoints[0].Addresses = []string{"2001:db8::5"}
	checkErrs(t, ValidateEndpointSliceUpdate(changed, old), e("addressType", tInvalid, "field is immutable"))
	same := old.DeepCopy()
	same.Endpoints[0].Addresses = []string{"10.1.0.6"}
	checkErrs(t, ValidateEndpointSliceUpdate(same, old))
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
