package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"portal.dev/portal/e2e/framework"
)

// externalIPService is a ClusterIP Service named name with the given
// external IPs, as YAML for kubectl.
func externalIPService(name string, ips ...string) string {
	y := "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\nspec:\n  ports:\n  - port: 80\n"
	if len(ips) > 0 {
		y += "  externalIPs: [" + strings.Join(ips, ", ") + "]\n"
	}
	return y
}

// TestServiceExternalIPs (CVE-2020-8554), under the default authorization
// (Node,RBAC): a user who may edit Services but not create
// services/externalips cannot point a Service at an address outside
// --service-external-ip-cidrs, on create or by adding one later, and is
// told which field, why and what to do; inside the CIDRs, or as an
// administrator, external IPs work. Nobody sets status.loadBalancer but
// through the status subresource.
func TestServiceExternalIPs(t *testing.T) {
	s := framework.StartServer(t, "--service-external-ip-cidrs", "203.0.113.0/24")
	s.MustKubectl("create", "namespace", "a")
	s.MustKubectl("create", "rolebinding", "gina-edit", "-n", "a", "--clusterrole", "edit", "--user", "gina")
	gina := s.UserKubeconfig(t, "gina", s.URL())
	asGina := func(stdin string, args ...string) (string, error) {
		return s.KubectlStdin(stdin, append([]string{"--kubeconfig", gina, "-n", "a"}, args...)...)
	}
	waitUntil(t, "gina's edit binding to take effect", func() bool {
		_, err := asGina("", "get", "services")
		return err == nil
	})

	out, err := asGina(externalIPService("outside", "198.51.100.7"), "create", "-f", "-")
	for _, want := range []string{`services "outside" is forbidden`, "spec.externalIPs[0]: Forbidden: external IP 198.51.100.7 is not allowed",
		`user "gina" cannot create services/externalips in namespace "a"`, "203.0.113.0/24 (--service-external-ip-cidrs)"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("external IP outside the CIDRs: got %v\n%s\nwant a 403 saying %q", err, out, want)
		}
	}
	if out, err := asGina(externalIPService("inside", "203.0.113.7"), "create", "-f", "-"); err != nil {
		t.Errorf("external IP inside the CIDRs: %v\n%s", err, out)
	}
	s.MustKubectlStdin(externalIPService("by-admin", "198.51.100.7"), "-n", "a", "create", "-f", "-")

	// Gina may edit the administrator's Service, keeping its address, but
	// not add one of her own outside the CIDRs.
	if out, err := asGina("", "label", "service", "by-admin", "team=g"); err != nil {
		t.Errorf("update keeping the external IPs: %v\n%s", err, out)
	}
	out, err = asGina("", "patch", "service", "by-admin", "--type", "json",
		"-p", `[{"op":"add","path":"/spec/externalIPs/-","value":"198.51.100.8"}]`)
	if err == nil || !strings.Contains(out, "spec.externalIPs[1]: Forbidden: external IP 198.51.100.8") {
		t.Errorf("update adding an external IP: got %v\n%s\nwant a 403 naming spec.externalIPs[1]", err, out)
	}

	// The proxy's and a node agent's credentials may not create Services
	// at all.
	agent := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if out, err := exec.Command(framework.Binary(t), "kubeconfig", "--data-dir", s.DataDir, "--user", "system:node:node1",
		"--group", "system:nodes", "--server", s.URL(), "-o", agent).CombinedOutput(); err != nil {
		t.Fatalf("agent kubeconfig: %v\n%s", err, out)
	}
	for user, kc := range map[string]string{"system:kube-proxy": s.UserKubeconfig(t, "system:kube-proxy", s.URL()), "system:node:node1": agent} {
		out, err = s.KubectlStdin(externalIPService("from-component", "198.51.100.9"), "--kubeconfig", kc, "-n", "a", "create", "-f", "-")
		if want := `User "` + user + `" cannot create resource "services" in API group "" in the namespace "a"`; err == nil || !strings.Contains(out, want) {
			t.Errorf("%s creating a Service with an external IP: got %v\n%s\nwant upstream's 403 %q", user, err, out, want)
		}
	}

	// status.loadBalancer: the main resource drops it, and edit holds no
	// right to the status subresource.
	lbPatch := `{"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.10"}]}}}`
	s.MustKubectl("-n", "a", "patch", "service", "inside", "--type", "merge", "-p", lbPatch)
	if got := s.MustKubectl("-n", "a", "get", "service", "inside", "-o", "jsonpath={.status.loadBalancer}"); strings.Contains(got, "198.51.100.10") {
		t.Errorf("status written through the main resource: got %s", got)
	}
	out, err = asGina("", "patch", "service", "inside", "--subresource", "status", "--type", "merge", "-p", lbPatch)
	if err == nil || !strings.Contains(out, `cannot patch resource "services/status"`) {
		t.Errorf("edit patching services/status: got %v\n%s\nwant a 403", err, out)
	}
}
