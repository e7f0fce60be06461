package e2e

import (
	"strings"
	"testing"

	"portal.dev/portal/e2e/framework"
)

// TestAppsAPI drives an unmodified kubectl through the apps/v1 API of
// `portal server` (no controllers are needed for what it checks): create,
// the table columns, explain, scale and server-side apply.
func TestAppsAPI(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "namespace", "apps")
	k := func(args ...string) string {
		t.Helper()
		return s.MustKubectl(append([]string{"-n", "apps"}, args...)...)
	}

	t.Run("create deployment", func(t *testing.T) {
		if out := k("create", "deployment", "web", "--image=x", "--replicas=3"); !strings.Contains(out, "deployment.apps/web created") {
			t.Fatalf("got %q, want created", out)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "3 1" {
			t.Fatalf("replicas and generation: got %q, want \"3 1\"", got)
		}
		k("get", "deploy,rs")
	})
	t.Run("scale", func(t *testing.T) {
		if out := k("scale", "deploy/web", "--replicas=5"); !strings.Contains(out, "deployment.apps/web scaled") {
			t.Fatalf("got %q, want scaled", out)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "5 2" {
			t.Fatalf("replicas and generation after scale: got %q, want \"5 2\"", got)
		}
		if out, err := s.Kubectl("-n", "apps", "scale", "deploy/web", "--current-replicas=3", "--replicas=1"); err == nil {
			t.Fatalf("scale with a stale --current-replicas: got success %q, want a refusal", out)
		}
		if out := k("scale", "deploy/web", "--current-replicas=5", "--replicas=2"); !strings.Contains(out, "scaled") {
			t.Fatalf("scale with a matching --current-replicas: got %q", out)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"); got != "2" {
			t.Fatalf("replicas: got %q, want 2", got)
		}
		scale := k("get", "--raw", "/apis/apps/v1/namespaces/apps/deployments/web/scale")
		for _, want := range []string{`"kind":"Scale"`, `"apiVersion":"autoscaling/v1"`, `"selector":"app=web"`, `"replicas":2`} {
			if !strings.Contains(scale, want) {
				t.Fatalf("scale subresource: got %s, want %s in it", scale, want)
			}
		}
	})
}
