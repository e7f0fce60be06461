package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
)

// TestServerRunsDNS: `portal server` serves cluster DNS in-process, with
// its own client, and /readyz waits for it.
func TestServerRunsDNS(t *testing.T) {
	s := framework.StartServer(t)
	if out := s.MustKubectl("get", "--raw", "/readyz?verbose"); !strings.Contains(out, "[+]dns ok") {
		t.Errorf("/readyz does not check DNS:\n%s", out)
	}
	dig := func(name string) string {
		out, err := exec.Command("dig", "@127.0.0.1", "-p", s.DNSPort(), "+short", "+time=2", "+tries=1", name).CombinedOutput()
		if err != nil {
			t.Fatalf("dig %s: %v: %s", name, err, out)
		}
		return strings.TrimSpace(string(out))
	}
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
