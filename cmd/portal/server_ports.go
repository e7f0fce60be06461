package main

import (
	"net"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/controller/servicelb"
)

// reservedNodePorts returns the ports `portal server` itself listens on
// at the node's addresses. servicelb gives LoadBalancer Services the
// nodes' addresses when no pools are configured, and the proxy then sends
// a Service's port on them to the Service: a Service on port 80 would take
// the Ingress controller's traffic. servicelb refuses these ports instead,
// naming the holder in the Service's Event. A component listening only on
// loopback holds no port of the node's addresses.
func reservedNodePorts(so serverOptions, enabled func(string) bool) []servicelb.ReservedPort {
	var out []servicelb.ReservedPort
	add := func(proto corev1.Protocol, port int, holder string) {
		if port > 0 {
			out = append(out, servicelb.ReservedPort{Protocol: proto, Port: int32(port), Holder: holder})
		}
	}
	if !so.api.BindAddress.IsLoopback() {
		add(corev1.ProtocolTCP, so.api.SecurePort, "the API server of portal server (--secure-port)")
	}
	if enabled("ingress") && !loopback(so.ingress.BindAddress) {
		add(corev1.ProtocolTCP, so.ingress.HTTPPort, "the Ingress controller of portal server (--http-port)")
		add(corev1.ProtocolTCP, so.ingress.HTTPSPort, "the Ingress controller of portal server (--https-port)")
	}
	if enabled("dns") && anyNonLoopback(so.dns.BindAddresses) {
		add(corev1.ProtocolTCP, so.dns.Port, "the DNS of portal server (--dns-port)")
		add(corev1.ProtocolUDP, so.dns.Port, "the DNS of portal server (--dns-port)")
	}
	return out
}

// loopback reports whether addr, an IP address or host name ("" for
// every address), is a loopback address only.
func loopback(addr string) bool {
	if addr == "localhost" {
		return true
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsLoopback()
}

func anyNonLoopback(addrs []string) bool {
	if len(addrs) == 0 {
		return true // every address
	}
	for _, a := range addrs {
		if !loopback(a) {
			return true
		}
	}
	return false
}
