package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/e2e/framework"
)

const serviceYAML = `apiVersion: v1
kind: Service
metadata:
  name: my-service
  labels:
    app: web
spec:
  selector:
    app: MyApp
  ports:
  - name: http
    protocol: TCP
    port: 80
    targetPort: 9376
`

// TestKubectl drives an unmodified kubectl through the verbs a user has,
// with default flags, against `portal server`.
func TestKubectl(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "namespace", "tour")
	k := func(args ...string) string {
		t.Helper()
		return s.MustKubectl(append([]string{"-n", "tour"}, args...)...)
	}
	kIn := func(stdin string, args ...string) string {
		t.Helper()
		return s.MustKubectlStdin(stdin, append([]string{"-n", "tour"}, args...)...)
	}

	t.Run("apply twice with a change", func(t *testing.T) {
		if out := kIn(serviceYAML, "apply", "-f", "-"); !strings.Contains(out, "service/my-service created") {
			t.Fatalf("got %q, want created", out)
		}
		changed := strings.Replace(serviceYAML, "9376", "9377", 1)
		if out := kIn(changed, "apply", "-f", "-"); !strings.Contains(out, "configured") {
			t.Fatalf("got %q, want configured", out)
		}
		if got := k("get", "svc", "my-service", "-o", "jsonpath={.spec.ports[0].targetPort}"); got != "9377" {
			t.Fatalf("targetPort: got %q, want 9377", got)
		}
	})
	t.Run("server-side apply", func(t *testing.T) {
		ssa := strings.Replace(serviceYAML, "app: web", "app: web\n    ssa: yes-it-is", 1)
		if out := kIn(ssa, "apply", "--server-side", "--force-conflicts", "-f", "-"); !strings.Contains(out, "serverside-applied") {
			t.Fatalf("got %q", out)
		}
		managers := k("get", "svc", "my-service", "-o", "jsonpath={.metadata.managedFields[*].manager}", "--show-managed-fields")
		if !strings.Contains(managers, "kubectl") {
			t.Fatalf("managedFields managers: got %q, want a kubectl manager", managers)
		}
	})
	t.Run("get table and formats", func(t *testing.T) {
		table := k("get", "svc")
		if first := strings.Fields(strings.SplitN(table, "\n", 2)[0]); strings.Join(first, " ") != "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE" {
			t.Fatalf("header: got %q", first)
		}
		if wide := k("get", "svc", "-o", "wide"); !strings.Contains(wide, "SELECTOR") || !strings.Contains(wide, "app=MyApp") {
			t.Fatalf("wide: got %q", wide)
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(k("get", "svc", "my-service", "-o", "json")), &obj); err != nil {
			t.Fatalf("-o json: %v", err)
		}
		if y := k("get", "svc", "my-service", "-o", "yaml"); !strings.Contains(y, "kind: Service") {
			t.Fatalf("-o yaml: got %q", y)
		}
		if d := k("describe", "svc", "my-service"); !strings.Contains(d, "Selector:") || !strings.Contains(d, "app=MyApp") {
			t.Fatalf("describe: got %q", d)
		}
	})
	t.Run("create patch label annotate replace", func(t *testing.T) {
		k("create", "configmap", "cfg", "--from-literal=a=1")
		k("patch", "configmap", "cfg", "-p", `{"data":{"b":"2"}}`)
		k("patch", "configmap", "cfg", "--type", "merge", "-p", `{"data":{"c":"3"}}`)
		k("patch", "configmap", "cfg", "--type", "json", "-p", `[{"op":"add","path":"/data/d","value":"4"}]`)
		k("label", "configmap", "cfg", "tier=gold")
		k("annotate", "configmap", "cfg", "note=hi")
		got := k("get", "configmap", "cfg", "-o", "jsonpath={.data.a}{.data.b}{.data.c}{.data.d} {.metadata.labels.tier} {.metadata.annotations.note}")
		if got != "1234 gold hi" {
			t.Fatalf("got %q, want %q", got, "1234 gold hi")
		}
		y := k("get", "configmap", "cfg", "-o", "yaml")
		kIn(strings.Replace(y, "a: \"1\"", "a: \"9\"", 1), "replace", "-f", "-")
		if got := k("get", "configmap", "cfg", "-o", "jsonpath={.data.a}"); got != "9" {
			t.Fatalf("after replace: got %q, want 9", got)
		}
	})
	t.Run("edit", func(t *testing.T) {
		editor := filepath.Join(t.TempDir(), "editor.sh")
		os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/tier: gold/tier: silver/' \"$1\"\n"), 0o755)
		cmd := exec.Command("kubectl", "-n", "tour", "edit", "configmap", "cfg")
		if _, err := exec.LookPath("kubectl"); err != nil {
			cmd = exec.Command(framework.Binary(t), "kubectl", "-n", "tour", "edit", "configmap", "cfg")
		}
		cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig(), "EDITOR="+editor, "KUBE_EDITOR="+editor)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("edit: %v\n%s", err, out)
		}
		if got := k("get", "configmap", "cfg", "-o", "jsonpath={.metadata.labels.tier}"); got != "silver" {
			t.Fatalf("after edit: got %q, want silver", got)
		}
	})
	t.Run("status subresource", func(t *testing.T) {
		// Load-balancer status is only allowed on a LoadBalancer Service;
		// a class of its own keeps servicelb from writing it.
		k("patch", "svc", "my-service", "--type", "merge",
			"-p", `{"spec":{"type":"LoadBalancer","allocateLoadBalancerNodePorts":false,"loadBalancerClass":"example.com/manual"}}`)
		k("patch", "svc", "my-service", "--subresource=status", "--type", "merge",
			"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"}]}}}`)
		if got := k("get", "svc", "my-service", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}"); got != "192.0.2.7" {
			t.Fatalf("status: got %q", got)
		}
		// Writing status through the main resource is ignored, as upstream.
		k("patch", "svc", "my-service", "--type", "merge", "-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.8"}]}}}`)
		if got := k("get", "svc", "my-service", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}"); got != "192.0.2.7" {
			t.Fatalf("status after main-resource patch: got %q, want unchanged 192.0.2.7", got)
		}
	})
	t.Run("watch", func(t *testing.T) {
		ctxCmd := exec.Command("kubectl", "-n", "tour", "get", "configmaps", "-w", "--output-watch-events")
		if _, err := exec.LookPath("kubectl"); err != nil {
			ctxCmd = exec.Command(framework.Binary(t), "kubectl", "-n", "tour", "get", "configmaps", "-w", "--output-watch-events")
		}
		ctxCmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig())
		out := &syncBuffer{}
		ctxCmd.Stdout, ctxCmd.Stderr = out, out
		if err := ctxCmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { ctxCmd.Process.Kill(); ctxCmd.Wait() }()
		waitFor(t, 10*time.Second, func() bool { return strings.Contains(out.String(), "cfg") })
		k("create", "configmap", "watched", "--from-literal=x=y")
		waitFor(t, 10*time.Second, func() bool {
			return strings.Contains(out.String(), "ADDED") && strings.Contains(out.String(), "watched")
		})
		k("delete", "configmap", "watched")
		waitFor(t, 10*time.Second, func() bool { return strings.Contains(out.String(), "DELETED") })
	})
	t.Run("discovery explain readyz", func(t *testing.T) {
		res := s.MustKubectl("api-resources")
		for _, want := range []string{"services", "endpointslices", "ingresses", "leases", "namespaces"} {
			if !strings.Contains(res, want) {
				t.Errorf("api-resources lacks %s:\n%s", want, res)
			}
		}
		if ex := s.MustKubectl("explain", "service.spec.ports.targetPort"); !strings.Contains(ex, "targetPort") {
			t.Fatalf("explain: got %q", ex)
		}
		if got := s.MustKubectl("get", "--raw", "/readyz"); got != "ok" {
			t.Fatalf("readyz: got %q", got)
		}
	})
	t.Run("delete and delete namespace", func(t *testing.T) {
		k("delete", "svc", "my-service")
		if out, err := s.Kubectl("-n", "tour", "get", "svc", "my-service"); err == nil || !strings.Contains(out, "NotFound") {
			t.Fatalf("after delete: got %q, %v", out, err)
		}
		s.MustKubectl("delete", "namespace", "tour", "--wait=true", "--timeout=60s")
		if out, err := s.Kubectl("get", "namespace", "tour"); err == nil || !strings.Contains(out, "NotFound") {
			t.Fatalf("namespace after delete: got %q, %v", out, err)
		}
	})
}

// TestBuiltInKubectl: `portal kubectl` works with no kubectl installed and
// finds the admin kubeconfig of the data directory by itself.
func TestBuiltInKubectl(t *testing.T) {
	s := framework.StartServer(t)
	cmd := exec.Command(framework.Binary(t), "kubectl", "get", "namespaces", "-o", "name")
	env := []string{"PORTAL_DATA_DIR=" + s.DataDir, "PATH=/usr/sbin:/sbin", "HOME=" + t.TempDir()}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("portal kubectl: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "namespace/kube-system") {
		t.Fatalf("got %q, want the system namespaces", out)
	}
}
