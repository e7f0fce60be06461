package framework

import (
	"fmt"
	"net"
	"os"
	"testing"
)

// TestFreePortOutsideEphemeralRange pins the cause of TestIngressComponent
// failing once with no answer in 30 s: FreePort took its ports from the
// kernel's ephemeral range, where the server's own port-0 listeners (its
// embedded etcd's) could take the Ingress port before the controller bound
// it, which then left itself out with /readyz ok. Its ports are now ones
// the kernel never hands out by itself, each once, free on every address.
func TestFreePortOutsideEphemeralRange(t *testing.T) {
	var lo, hi int
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip(err)
	}
	if _, err := fmt.Sscan(string(data), &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if lo-portsFrom < 1000 {
		t.Skipf("ephemeral range %d-%d leaves too few ports below it", lo, hi)
	}
	seen := map[int]bool{}
	for range 200 {
		port := FreePort(t)
		if port >= lo && port <= hi {
			t.Fatalf("got port %d, want one outside the ephemeral range %d-%d", port, lo, hi)
		}
		if seen[port] {
			t.Fatalf("got port %d twice, want each once", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			t.Fatalf("port %d: got %v, want it free on every address", port, err)
		}
		l.Close()
	}
}
