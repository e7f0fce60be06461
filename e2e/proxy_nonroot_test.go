package e2e

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// TestProxyUserspaceNonRoot: the userspace proxy runs as a normal user
// (nobody): it serves NodePorts, says per Service where to reach it, and
// needs no privilege to do so.
func TestProxyUserspaceNonRoot(t *testing.T) {
	b := testbed.New(t)
	node := b.Namespace("node")
	node.Bridge("tb0", podGateway+"/24")
	s := &framework.Server{Command: "server", DataDir: t.TempDir(), Port: 6443,
		Args: []string{"--advertise-address", podGateway, "--hostname-override", "node1", "--node-monitor-grace-period", "1h",
			"--disable", "dns,proxy,agent,ingress"},
		Wrap: []string{"ip", "netns", "exec", node.Name},
		Dial: node.DialContext,
	}
	framework.Attach(t, s)
	s.Start()
	c := s.Client()
	makeNodeWithIP(t, c, "node1", "zone-a", podGateway)
	ip := netip.MustParseAddr("10.244.0.70")
	b.Pod("plain", node, "tb0", ip.String()+"/24", podGateway).Serve("plain", ip, 8080)
	makePod(t, c, "default", podSpec{name: "plain", node: "node1", ip: ip.String(), labels: map[string]string{"app": "plain"}, ready: true})
	pb := &proxyBed{t: t, c: c, ns: "default"}
	svc := pb.service("plain", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	nodePort := svc.Spec.Ports[0].NodePort

	// nobody must be able to run the binary and read its kubeconfig.
	dir, err := os.MkdirTemp("", "portal-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin, kc := filepath.Join(dir, "portal"), filepath.Join(dir, "kubeconfig")
	copyFile(t, framework.Binary(t), bin, 0o755)
	copyFile(t, s.UserKubeconfig(t, "system:kube-proxy", s.URL()), kc, 0o644)
	log, err := os.Create(filepath.Join(t.TempDir(), "proxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := node.Start(log, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		bin, "proxy", "--kubeconfig", kc, "--proxy-mode", "userspace", "--hostname-override", "node1",
		"--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "")
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("proxy log:\n%s", data)
		}
	})

	addr := fmt.Sprintf("127.0.0.1:%d", nodePort)
	if got := reachable(t, node, "", addr); got != "plain" {
		t.Errorf("NodePort %s answered by %q, want plain", addr, got)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", proxy.Process.Pid))
	if !strings.Contains(string(status), "\nUid:\t65534\t65534\t65534\t65534") {
		t.Errorf("the proxy does not run as nobody:\n%s", status)
	}
	eventually(t, "the log says where to reach the Service", func() (bool, string) {
		data, _ := os.ReadFile(log.Name())
		return strings.Contains(string(data), "default/plain") && strings.Contains(string(data), fmt.Sprint(nodePort)), ""
	})
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
