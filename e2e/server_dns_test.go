package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/agent"
	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// TestServerRunsDNS: `portal server` serves cluster DNS in-process, with
// its own client, and /readyz waits for it; the DNS's /ready has a port of
// its own (--dns-ready-bind-address).
func TestServerRunsDNS(t *testing.T) {
	ready := fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
	s := framework.StartServer(t, "--dns-ready-bind-address", ready)
	if out := s.MustKubectl("get", "--raw", "/readyz?verbose"); !strings.Contains(out, "[+]dns ok") {
		t.Errorf("/readyz does not check DNS:\n%s", out)
	}
	if code, body := clientGet(&http.Client{Timeout: 5 * time.Second}, "http://"+ready+"/ready"); code != 200 {
		t.Errorf("GET /ready on --dns-ready-bind-address: got %d %q, want 200", code, body)
	}
	dig := func(name string) string { return digShort(t, nil, "127.0.0.1", s.DNSPort(), name) }
	if got := dig("kubernetes.default.svc.cluster.local"); got != "10.96.0.1" {
		t.Errorf("kubernetes.default: got %q, want 10.96.0.1", got)
	}
	svc, err := s.Client().CoreV1().Services("default").Create(context.Background(), service("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "web.default resolves to its ClusterIP", func() (bool, string) {
		got := dig("web.default.svc.cluster.local")
		return got == svc.Spec.ClusterIP, got
	})
	if err := s.Client().CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web.default gone after delete", func() (bool, string) {
		got := dig("web.default.svc.cluster.local")
		return got == "", got
	})
}

// TestServerDNSPublishesKubeDNS: with its agent, `portal server` publishes
// its DNS as the kube-dns Service with CoreDNS's ports, dns 53/UDP,
// dns-tcp 53/TCP and metrics 9153/TCP; the endpoint carries the metrics
// port when /metrics is served on the node's address, and it answers there.
// Runs in a network namespace, as the agent changes the node's network.
func TestServerDNSPublishesKubeDNS(t *testing.T) {
	const nodeIP = dnsNodeIP
	s, node := startDNSNode(t, "--disable", "proxy", "--dns-metrics-bind-address", "0.0.0.0:9153")
	c := s.Client()
	ctx := context.Background()

	eventually(t, "kube-dns has CoreDNS's ports", func() (bool, string) {
		svc, err := c.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, p := range svc.Spec.Ports {
			got = append(got, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
		}
		return slices.Equal(got, []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}), fmt.Sprint(got)
	})
	eventually(t, "the endpoint has a metrics port", func() (bool, string) {
		sl, err := c.DiscoveryV1().EndpointSlices("kube-system").Get(ctx, "kube-dns-node1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, p := range sl.Ports {
			got = append(got, fmt.Sprintf("%s %d/%s", *p.Name, *p.Port, *p.Protocol))
		}
		return len(sl.Endpoints) == 1 && sl.Endpoints[0].Addresses[0] == nodeIP &&
			slices.Equal(got, []string{"dns 53/UDP", "dns-tcp 53/TCP", "metrics 9153/TCP"}), fmt.Sprint(sl.Endpoints, got)
	})

	// A query on the node's address, then its count on the published
	// metrics port.
	if out := digShort(t, node, nodeIP, "53", "kubernetes.default.svc.cluster.local"); out != "10.96.0.1" {
		t.Errorf("dig kubernetes.default at %s: got %q, want 10.96.0.1", nodeIP, out)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: node.DialContext}}
	if code, body := clientGet(client, "http://"+nodeIP+":9153/metrics"); code != 200 || !strings.Contains(body, "coredns_dns_requests_total") {
		t.Errorf("GET /metrics at %s:9153: got %d, want 200 with coredns_dns_requests_total", nodeIP, code)
	}
	// /ready on CoreDNS's ready port, the server's default.
	if code, body := clientGet(client, "http://127.0.0.1:8181/ready"); code != 200 {
		t.Errorf("GET /ready on 127.0.0.1:8181: got %d %q, want 200", code, body)
	}
}

// dnsNodeIP is the address of the node startDNSNode makes.
const dnsNodeIP = "10.100.1.1"

// startDNSNode runs `portal server` with its agent and DNS in a node
// namespace at dnsNodeIP, whose default route goes through a peer
// namespace; args are the server's beyond the node's address and name.
// It skips the test without dig, which its callers ask the DNS with.
func startDNSNode(t *testing.T, args ...string) (*framework.Server, *testbed.NS) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("dig not installed (Debian package bind9-dnsutils)")
	}
	b := testbed.New(t)
	node, peer := b.Namespace("node"), b.Namespace("peer")
	b.Link(node, dnsNodeIP+"/24", peer, "10.100.1.2/24")
	node.MustRun("ip", "route", "add", "default", "via", "10.100.1.2")
	s := &framework.Server{Command: "server", DataDir: t.TempDir(), Port: 6443,
		Args: append([]string{"--advertise-address", dnsNodeIP, "--hostname-override", "node1", "--node-ip", dnsNodeIP}, args...),
		Wrap: []string{"ip", "netns", "exec", node.Name},
		Dial: node.DialContext,
	}
	framework.Attach(t, s)
	t.Cleanup(func() { agent.KillPods(filepath.Join(s.DataDir, "agent")) })
	s.Start()
	return s, node
}

// digShort asks the DNS server at server:port for name, from ns (nil: the
// host), once with a 2 s timeout, and returns dig's short answer. A dig
// that fails fails the test.
func digShort(t *testing.T, ns *testbed.NS, server, port, name string) string {
	t.Helper()
	args := []string{"@" + server, "-p", port, "+short", "+time=2", "+tries=1", name}
	cmd := exec.Command("dig", args...)
	if ns != nil {
		cmd = ns.Command("dig", args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dig %s: %v: %s", name, err, out)
	}
	return strings.TrimSpace(string(out))
}
