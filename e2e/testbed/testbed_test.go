package testbed

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBed builds a node with two pods and a client outside, checks that the
// client reaches a pod through the node and the node reaches both, and
// that teardown leaves no namespace behind.
func TestBed(t *testing.T) {
	var names []string
	t.Run("build", func(t *testing.T) {
		b := New(t)
		node := b.Namespace("node")
		node.Bridge("tb0", "10.244.0.1/24")
		client := b.Namespace("client")
		b.Link(node, "10.100.0.1/24", client, "10.100.0.2/24")
		client.MustRun("ip", "route", "add", "default", "via", "10.100.0.1")
		var backends []*Backend
		for i, name := range []string{"pod-a", "pod-b"} {
			ip := netip.AddrFrom4([4]byte{10, 244, 0, byte(10 + i)})
			pod := b.Pod(name, node, "tb0", ip.String()+"/24", "10.244.0.1")
			backends = append(backends, pod.Serve(name, ip, 8080))
			names = append(names, pod.Name)
		}
		names = append(names, node.Name, client.Name)
		ctx := context.Background()
		for _, be := range backends {
			got, err := node.AskTCP(ctx, netip.Addr{}, be.IP.String()+":8080")
			if err != nil || got != be.Name {
				t.Fatalf("node -> %s: got %q, %v; want %q", be.IP, got, err, be.Name)
			}
		}
		got, err := client.AskTCP(ctx, netip.Addr{}, "10.244.0.11:8080")
		if err != nil || got != "pod-b" {
			t.Fatalf("client -> pod-b through the node: got %q, %v", got, err)
		}
		u, err := client.UDPClient("10.244.0.10:8080", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		if got, err := u.Ask(time.Second); err != nil || got != "pod-a" {
			t.Fatalf("UDP client -> pod-a: got %q, %v", got, err)
		}
		// The host namespace cannot see the bed's addresses.
		if out, _ := exec.Command("ip", "-o", "addr").Output(); strings.Contains(string(out), "10.244.0.1/") {
			t.Fatalf("the bed leaked an address into the host namespace:\n%s", out)
		}
	})
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.Contains(string(out), n) {
			t.Errorf("namespace %s still exists after the test", n)
		}
	}
}
