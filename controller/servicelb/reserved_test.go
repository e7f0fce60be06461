package servicelb

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A LoadBalancer Service on port 80 of a default `portal server` got the
// node's address, and the proxy sent node:80 to it instead of the Ingress
// controller listening there. Ports other processes hold are refused.
func TestNodeModeReservedPorts(t *testing.T) {
	reserved := []ReservedPort{
		{Protocol: corev1.ProtocolTCP, Port: 80, Holder: "the Ingress controller of portal server (--http-port)"},
		{Protocol: corev1.ProtocolUDP, Port: 53, Holder: "the DNS of portal server (--dns-port)"},
	}
	svcs := []*corev1.Service{
		lbService("web", 0, ports("80/TCP")),
		lbService("web-v6", 1, families(v6), ports("8080/TCP", "80/TCP")),
		lbService("dns-tcp", 2, ports("53/TCP")),
		lbService("dns-udp", 3, ports("53/UDP")),
		lbService("free", 4, ports("81/TCP")),
		lbService("shown", 5, ports("80/TCP"), status("10.0.0.1")), // given port 80 before it was reserved
	}
	nodes := []*corev1.Node{testNode("n1", "10.0.0.1", "fd00::1")}
	runWithOptions(t, Options{Reserved: reserved}, objects(svcs, nodes...), func(h *harness) {
		for _, name := range []string{"web", "web-v6", "dns-udp", "shown"} {
			h.wantIngress(name)
			h.wantCondition(name, condFalse, ReasonPortInUse)
		}
		evs := h.events()
		for _, want := range []string{
			"Warning AllocationFailed cannot allocate load balancer IPs: port 80/TCP in use on the nodes by the Ingress controller of portal server (--http-port)",
			"Warning AllocationFailed cannot allocate load balancer IPs: port 80/TCP (IPv6) in use on the nodes by the Ingress controller of portal server (--http-port)",
			"Warning AllocationFailed cannot allocate load balancer IPs: port 53/UDP in use on the nodes by the DNS of portal server (--dns-port)",
		} {
			if !slices.Contains(evs, want) {
				h.t.Errorf("got events %q, want %q", evs, want)
			}
		}
		h.wantIngress("dns-tcp", "10.0.0.1")
		h.wantIngress("free", "10.0.0.1")
		// Moving off the reserved port gets the Service its address.
		h.update("web", ports("8081/TCP"))
		h.wantIngress("web", "10.0.0.1")
	})
}

// With pools the nodes' ports do not matter: the addresses are others.
func TestPoolModeIgnoresReservedPorts(t *testing.T) {
	reserved := []ReservedPort{{Protocol: corev1.ProtocolTCP, Port: 80, Holder: "the Ingress controller"}}
	runWithOptions(t, Options{Pools: mustPools(t, "192.0.2.0/30"), Reserved: reserved},
		objects([]*corev1.Service{lbService("web", 0, ports("80/TCP"))}), func(h *harness) {
			h.wantIngress("web", "192.0.2.1")
		})
}

func TestParseReservedPorts(t *testing.T) {
	for _, tc := range []struct{ in, want, wantErr string }{
		{in: "80/TCP, 443/tcp,53/UDP,9000", want: "[{TCP 80 h} {TCP 443 h} {UDP 53 h} {TCP 9000 h}]"},
		{in: "", want: "[]"},
		{in: "80/ICMP", wantErr: `"80/ICMP": protocol is not TCP, UDP or SCTP`},
		{in: "0/TCP", wantErr: `"0/TCP": port is not a number from 1 to 65535`},
		{in: "http", wantErr: `"http": port is not a number from 1 to 65535`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseReservedPorts(tc.in, "h")
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr || err == nil && fmt.Sprint(got) != tc.want {
				t.Errorf("got %v, %q; want %s, %q", got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}
