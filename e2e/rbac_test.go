package e2e

import (
	"strings"
	"testing"
	"time"

	"portal.dev/portal/e2e/framework"
)

// TestRBAC: with the default authorization (Node,RBAC) the bootstrap
// policy is served and enforced through real kubectl: roles and bindings
// are created with kubectl create, a user holds only what is bound to
// them, a user with edit in a namespace cannot bind themselves admin
// there, and kubectl auth can-i --list shows the proxy only what it needs.
func TestRBAC(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "namespace", "a")
	dave := s.UserKubeconfig(t, "dave", s.URL())
	asDave := func(args ...string) (string, error) {
		return s.Kubectl(append([]string{"--kubeconfig", dave}, args...)...)
	}

	t.Run("bootstrap roles listed, admin aggregated", func(t *testing.T) { rbacBootstrapRoles(t, s) })
	t.Run("a user holds nothing until bound", func(t *testing.T) { rbacBinding(t, s, asDave) })
	t.Run("edit cannot bind itself admin", func(t *testing.T) { rbacEscalation(t, s, asDave) })
	t.Run("can-i --list for the proxy shows only what it needs", func(t *testing.T) { rbacProxyRules(t, s) })
	t.Run("bad input", func(t *testing.T) { rbacBadInput(t, s) })
}

// rbacBootstrapRoles: the bootstrap roles are listed and admin aggregates the
// pieces labelled for it.
func rbacBootstrapRoles(t *testing.T, s *framework.Server) {
	out := s.MustKubectl("get", "clusterroles")
	for _, want := range []string{"cluster-admin", "admin", "edit", "view", "system:node-proxier", "system:kube-dns",
		"system:portal-ingress", "system:controller:endpointslice-controller", "system:node"} {
		if !strings.Contains(out, want+" ") {
			t.Errorf("kubectl get clusterroles lacks %s:\n%s", want, out)
		}
	}
	waitUntil(t, "admin to aggregate the roles rules", func() bool {
		out, _ := s.Kubectl("get", "clusterrole", "admin", "-o", "jsonpath={.rules[*].resources}")
		return strings.Contains(out, "rolebindings") && strings.Contains(out, "deployments")
	})
}

// rbacBinding: a user holds nothing until a RoleBinding gives them edit in
// one namespace, and then nothing elsewhere.
func rbacBinding(t *testing.T, s *framework.Server, asDave func(...string) (string, error)) {
	out, err := asDave("get", "services", "-n", "a")
	if err == nil || !strings.Contains(out, `User "dave" cannot list resource "services" in API group "" in the namespace "a"`) {
		t.Fatalf("unbound user: got %v\n%s\nwant upstream's forbidden message", err, out)
	}
	s.MustKubectl("create", "rolebinding", "dave-edit", "-n", "a", "--clusterrole", "edit", "--user", "dave")
	waitUntil(t, "the edit binding to take effect", func() bool {
		_, err := asDave("get", "services", "-n", "a")
		return err == nil
	})
	if out, err := asDave("get", "services", "-n", "default"); err == nil {
		t.Fatalf("edit in a, list in default: got allowed\n%s", out)
	}
	if out, err := asDave("get", "secrets", "-n", "a"); err != nil {
		t.Fatalf("edit reads secrets: %v\n%s", err, out)
	}
}

// rbacEscalation: a user with edit cannot bind themselves admin, even when
// allowed to create bindings; binding what they hold is fine.
func rbacEscalation(t *testing.T, s *framework.Server, asDave func(...string) (string, error)) {
	// With edit alone dave may not create bindings at all.
	out, err := asDave("create", "rolebinding", "dave-admin", "-n", "a", "--clusterrole", "admin", "--user", "dave")
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("edit creating a binding: got %v\n%s\nwant 403", err, out)
	}
	// Given the right to create bindings, binding admin is still an
	// escalation: admin holds rules dave does not.
	s.MustKubectl("create", "role", "binder", "-n", "a", "--verb", "create", "--resource", "rolebindings.rbac.authorization.k8s.io")
	s.MustKubectl("create", "rolebinding", "dave-binder", "-n", "a", "--role", "binder", "--user", "dave")
	// Until the binding reaches the authorizer's cache the create is
	// refused as not allowed at all; then as an escalation.
	waitUntil(t, "the escalation refusal", func() bool {
		out, err = asDave("create", "rolebinding", "dave-admin", "-n", "a", "--clusterrole", "admin", "--user", "dave")
		return err != nil && strings.Contains(out, "is attempting to grant RBAC permissions not currently held")
	})
	if !strings.Contains(out, "forbidden") {
		t.Fatalf("escalation refusal: got %s, want a 403", out)
	}
	// Binding what dave holds is fine.
	out, err = asDave("create", "rolebinding", "dave-view", "-n", "a", "--clusterrole", "view", "--user", "dave")
	if err != nil {
		t.Fatalf("binding view, which edit holds: %v\n%s", err, out)
	}
	// Writing a role with rules dave lacks is refused the same way.
	out, err = asDave("create", "role", "wide", "-n", "a", "--verb", "*", "--resource", "*")
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("edit creating a role: got %v\n%s\nwant 403", err, out)
	}
}

// rbacProxyRules: kubectl auth can-i --list shows the proxy only what it
// needs.
func rbacProxyRules(t *testing.T, s *framework.Server) {
	out := s.MustKubectl("auth", "can-i", "--list", "--as", "system:kube-proxy")
	for _, want := range []string{"services", "endpointslices.discovery.k8s.io", "nodes", "events"} {
		if !strings.Contains(out, want) {
			t.Errorf("proxy's rules lack %s:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(line, " ") {
			continue
		}
		switch f[0] {
		case "secrets", "configmaps", "pods", "namespaces", "*.*":
			t.Errorf("proxy may touch %s:\n%s", f[0], out)
		}
	}
}

// rbacBadInput: a binding to a missing role grants nothing; a malformed role
// or binding is a 422 naming the field.
func rbacBadInput(t *testing.T, s *framework.Server) {
	// A binding to a missing role is accepted, as upstream, and
	// grants nothing.
	s.MustKubectl("create", "rolebinding", "ghost", "-n", "a", "--clusterrole", "no-such-role", "--user", "erin")
	erin := s.UserKubeconfig(t, "erin", s.URL())
	if out, err := s.Kubectl("--kubeconfig", erin, "get", "pods", "-n", "a"); err == nil {
		t.Fatalf("binding to a missing role granted a list:\n%s", out)
	}
	// A malformed role is a 422 naming the field.
	out, err := s.KubectlStdin(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"bad","namespace":"a"},"rules":[{"apiGroups":[""],"resources":["pods"]}]}`, "create", "-f", "-")
	if err == nil || !strings.Contains(out, "rules[0].verbs") {
		t.Fatalf("role without verbs: got %v\n%s\nwant 422 on rules[0].verbs", err, out)
	}
	out, err = s.KubectlStdin(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"bad","namespace":"a"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Secret","name":"x"}}`, "create", "-f", "-")
	if err == nil || !strings.Contains(out, "roleRef.kind") {
		t.Fatalf("binding to a Secret: got %v\n%s\nwant 422 on roleRef.kind", err, out)
	}
}

// waitUntil waits for cond for up to 30 s: authorization reads informer
// caches, so a new binding takes effect a moment after it is written.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 30*time.Second, what, func() (bool, string) { return cond(), "not yet" })
}
