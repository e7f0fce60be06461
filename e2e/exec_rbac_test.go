package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// execRoles are the Roles execRBAC binds: get alone on the stream
// subresources, and get with create.
const execRoles = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: exec-get, namespace: default}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
- {apiGroups: [""], resources: [pods/exec, pods/attach, pods/portforward], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: exec-create, namespace: default}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
- {apiGroups: [""], resources: [pods/exec], verbs: [get, create]}
`

// execRBAC: with Node,RBAC a pod session needs create on its
// subresource whatever the transport. A user with only get on pods/exec
// is refused even over kubectl's WebSocket (a GET), as upstream since
// 1.35; get with create runs the command; a user bound only view is
// refused exec, attach, port-forward and cp with upstream's 403.
func execRBAC(t *testing.T, ab *agentBed) {
	if _, errOut, code := ab.kubectlRun(execRoles, "apply", "-f", "-"); code != 0 {
		t.Fatalf("creating the roles: exit %d: %s", code, errOut)
	}
	kc := map[string]string{}
	for user, bind := range map[string]string{"getter": "--role=exec-get", "runner": "--role=exec-create", "viewer": "--clusterrole=view"} {
		if _, errOut, code := ab.kubectlRun("", "create", "rolebinding", user, bind, "--user", user); code != 0 {
			t.Fatalf("binding %s: exit %d: %s", user, code, errOut)
		}
		kc[user] = ab.server.UserKubeconfig(t, user, ab.server.URL())
	}
	as := func(user string, args ...string) (string, string, int) {
		return ab.kubectlRun("", append([]string{"--kubeconfig", kc[user]}, args...)...)
	}
	waitUntil(t, "the runner's binding to take effect", func() bool {
		out, _, code := as("runner", "exec", "web", "--", "echo", "ran")
		return code == 0 && out == "ran\n"
	})
	t.Run("get alone cannot exec", func(t *testing.T) {
		out, errOut, code := as("getter", "exec", "web", "--", "echo", "ran")
		want := `User "getter" cannot create resource "pods/exec" in API group "" in the namespace "default"`
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("got exit %d, stdout %q, stderr %q; want a 403 with %q", code, out, errOut, want)
		}
	})
	t.Run("view cannot exec, attach, port-forward or cp", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "f")
		os.WriteFile(src, []byte("x"), 0o644)
		for _, tc := range []struct {
			name, resource string
			args           []string
		}{
			{"exec", "pods/exec", []string{"exec", "web", "--", "true"}},
			{"attach", "pods/attach", []string{"attach", "ticker"}},
			{"port-forward", "pods/portforward", []string{"port-forward", "web", "18089:80"}},
			{"cp", "pods/exec", []string{"cp", src, "web:/tmp/f"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, errOut, code := as("viewer", tc.args...)
				want := `User "viewer" cannot create resource "` + tc.resource + `" in API group "" in the namespace "default"`
				if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "forbidden") {
					t.Errorf("got exit %d, stderr %q; want a 403 with %q", code, errOut, want)
				}
			})
		}
	})
	t.Run("nodes/proxy serves diagnostics, not sessions", func(t *testing.T) {
		for _, p := range []string{"exec/default/web/main?command=true&output=1", "attach/default/web/main?output=1",
			"portForward/default/web"} {
			_, errOut, code := ab.kubectlRun("", "get", "--raw", "/api/v1/nodes/node1/proxy/"+p)
			if code == 0 || !strings.Contains(errOut, "not served through nodes/proxy") {
				t.Errorf("admin GET nodes/proxy/%s: got exit %d, stderr %q; want a 403", p, code, errOut)
			}
		}
		if out, errOut, code := ab.kubectlRun("", "get", "--raw", "/api/v1/nodes/node1/proxy/healthz"); code != 0 || out != "ok" {
			t.Errorf("nodes/proxy/healthz: got %q, exit %d, stderr %q; want ok", out, code, errOut)
		}
	})
}
