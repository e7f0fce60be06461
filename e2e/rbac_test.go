package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
	t.Run("a restarted server never answers 403 while its caches fill", func(t *testing.T) { rbacRestart(t, s, dave) })
}

// rbacRestart: a bound user asking a restarted server from the moment it
// serves gets answers, never a 403. The server once refused such requests
// until the informers behind RBAC had synced, although the policy allowed
// them.
func rbacRestart(t *testing.T, s *framework.Server, kubeconfig string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial, cfg.QPS, cfg.Burst, cfg.Timeout = s.Dial, 1000, 1000, 30*time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Launch()
	defer s.WaitReady(90 * time.Second)
	deadline := time.Now().Add(90 * time.Second)
	for attempts := 1; ; attempts++ {
		_, err := client.CoreV1().Services("a").List(context.Background(), metav1.ListOptions{})
		if err == nil {
			t.Logf("the restarted server answered the bound user after %d attempts", attempts)
			return
		}
		if apierrors.IsForbidden(err) {
			t.Fatalf("restarted server refused a bound user with 403 (attempt %d): %v", attempts, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted server did not answer a bound user within 90 s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// proxyRules are the resources the proxy may touch and the verbs on each:
// it watches Services, Endpoints, EndpointSlices and Nodes, writes Events,
// and, as every user, may review itself.
var proxyRules = map[string][]string{
	"services":                        {"list", "watch"},
	"endpoints":                       {"list", "watch"},
	"endpointslices.discovery.k8s.io": {"list", "watch"},
	"nodes":                           {"get", "list", "watch"},
	"events":                          {"create", "patch", "update"},
	"events.events.k8s.io":            {"create", "patch", "update"},
	"selfsubjectreviews.authentication.k8s.io":      {"create"},
	"selfsubjectaccessreviews.authorization.k8s.io": {"create"},
	"selfsubjectrulesreviews.authorization.k8s.io":  {"create"},
}

// rbacProxyRules: kubectl auth can-i --list shows the proxy only what it
// needs, every row checked against proxyRules, and the proxy's own
// credential gets upstream's 403 for reading a Secret and for deleting a
// namespace.
func rbacProxyRules(t *testing.T, s *framework.Server) {
	out := s.MustKubectl("auth", "can-i", "--list", "--as", "system:kube-proxy")
	rows := canIRows(t, out)
	seen := map[string]bool{}
	for _, r := range rows {
		if r.resource == "" {
			// Non-resource URLs: discovery and health, read only.
			if !slices.Equal(r.verbs, []string{"get"}) {
				t.Errorf("proxy may %v non-resource URLs %s", r.verbs, r.urls)
			}
			continue
		}
		allowed, ok := proxyRules[r.resource]
		if !ok || r.names != "[]" {
			t.Errorf("proxy may touch %s (names %s, verbs %v):\n%s", r.resource, r.names, r.verbs, out)
			continue
		}
		for _, v := range r.verbs {
			if !slices.Contains(allowed, v) {
				t.Errorf("proxy may %s %s, want only %v", v, r.resource, allowed)
			}
		}
		seen[r.resource] = true
	}
	for _, want := range []string{"services", "endpointslices.discovery.k8s.io", "nodes", "events"} {
		if !seen[want] {
			t.Errorf("proxy's rules lack %s:\n%s", want, out)
		}
	}

	s.MustKubectl("create", "secret", "generic", "other", "--from-literal", "k=v")
	proxy := s.UserKubeconfig(t, "system:kube-proxy", s.URL())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "secret", "other"},
			`Error from server (Forbidden): secrets "other" is forbidden: User "system:kube-proxy" cannot get resource "secrets" in API group "" in the namespace "default"`},
		{[]string{"delete", "namespace", "a"},
			`Error from server (Forbidden): namespaces "a" is forbidden: User "system:kube-proxy" cannot delete resource "namespaces" in API group ""`},
	} {
		out, err := s.Kubectl(append([]string{"--kubeconfig", proxy}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("kubectl %s as the proxy: got %v\n%s\nwant %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}

// canIRow is one row of kubectl auth can-i --list.
type canIRow struct {
	resource, urls, names string
	verbs                 []string
}

// canIRows parses kubectl auth can-i --list's table by its header's
// column positions, so an empty Resources cell (a non-resource URL row)
// or a resource such as secrets/status is read as what it is.
func canIRows(t *testing.T, out string) []canIRow {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	cols := []int{0}
	for _, h := range []string{"Non-Resource URLs", "Resource Names", "Verbs"} {
		i := strings.Index(header, h)
		if i < 0 {
			t.Fatalf("can-i --list header %q lacks %q", header, h)
		}
		cols = append(cols, i)
	}
	cell := func(line string, k int) string {
		from, to := cols[k], len(line)
		if k+1 < len(cols) {
			to = min(cols[k+1], len(line))
		}
		if from >= len(line) {
			return ""
		}
		return strings.TrimSpace(line[from:to])
	}
	var rows []canIRow
	for _, line := range lines[1:] {
		verbs := strings.Trim(cell(line, 3), "[]")
		rows = append(rows, canIRow{resource: cell(line, 0), urls: cell(line, 1), names: cell(line, 2), verbs: strings.Fields(verbs)})
	}
	return rows
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
