package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"portal.dev/portal/e2e/framework"
)

// TestAuthReviews: under the default authorization (Node,RBAC), real
// kubectl's `auth can-i` (a SelfSubjectAccessReview) and `auth whoami` (a
// SelfSubjectReview) answer for the user who asks; a SubjectAccessReview
// asks for another user, and a TokenReview says whom a bearer token
// belongs to.
func TestAuthReviews(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "namespace", "a")
	erin := s.UserKubeconfig(t, "erin", s.URL())
	asErin := func(args ...string) (string, error) {
		return s.Kubectl(append([]string{"--kubeconfig", erin}, args...)...)
	}

	t.Run("can-i", func(t *testing.T) {
		if out := s.MustKubectl("auth", "can-i", "create", "services"); strings.TrimSpace(out) != "yes" {
			t.Errorf("admin can-i create services: got %q, want yes", out)
		}
		if out, err := asErin("auth", "can-i", "create", "services", "-n", "a"); err == nil || strings.TrimSpace(out) != "no" {
			t.Errorf("unbound user can-i create services: got %q (err %v), want no and a non-zero exit", out, err)
		}
		s.MustKubectl("create", "rolebinding", "erin-edit", "-n", "a", "--clusterrole", "edit", "--user", "erin")
		waitUntil(t, "the binding to reach can-i", func() bool {
			out, err := asErin("auth", "can-i", "create", "services", "-n", "a")
			return err == nil && strings.TrimSpace(out) == "yes"
		})
		if out, err := asErin("auth", "can-i", "create", "services", "-n", "default"); err == nil || strings.TrimSpace(out) != "no" {
			t.Errorf("edit in a, can-i in default: got %q (err %v), want no", out, err)
		}
		// Creating externalIPs is a separate permission edit does not hold.
		if out, err := asErin("auth", "can-i", "create", "services", "--subresource", "externalips", "-n", "a"); err == nil || strings.TrimSpace(out) != "no" {
			t.Errorf("edit can-i create services/externalips: got %q (err %v), want no", out, err)
		}
	})

	t.Run("whoami", func(t *testing.T) {
		out, err := asErin("auth", "whoami", "-o", "json")
		if err != nil {
			t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
		}
		var review struct {
			Kind   string `json:"kind"`
			Status struct {
				UserInfo struct {
					Username string   `json:"username"`
					Groups   []string `json:"groups"`
				} `json:"userInfo"`
			} `json:"status"`
		}
		if err := json.Unmarshal([]byte(out), &review); err != nil {
			t.Fatalf("whoami output: %v\n%s", err, out)
		}
		u := review.Status.UserInfo
		if review.Kind != "SelfSubjectReview" || u.Username != "erin" || !slices.Contains(u.Groups, "system:authenticated") {
			t.Errorf("whoami: got %s for %q in %v, want SelfSubjectReview for erin in system:authenticated", review.Kind, u.Username, u.Groups)
		}
		if out := s.MustKubectl("auth", "whoami"); !strings.Contains(out, "admin") || !strings.Contains(out, "system:masters") {
			t.Errorf("admin whoami: got\n%s\nwant admin in system:masters", out)
		}
	})

	// kubectl's client-side validation of a create-only kind (one with no
	// PATCH) asks for CustomResourceDefinitions, which Portal does not
	// serve; the reviews go with --validate=false.
	t.Run("subject access review", func(t *testing.T) {
		sar := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"erin",
			"resourceAttributes":{"namespace":"a","verb":"delete","resource":"services"}}}`
		out := s.MustKubectlStdin(sar, "create", "--validate=false", "-f", "-", "-o", "jsonpath={.status.allowed}")
		if out != "true" {
			t.Errorf("SubjectAccessReview erin delete services in a: got allowed=%q, want true", out)
		}
		out, err := s.KubectlStdin(sar, "--kubeconfig", erin, "create", "--validate=false", "-f", "-")
		if err == nil || !strings.Contains(out, `cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io"`) {
			t.Errorf("erin creating a SubjectAccessReview: got %v\n%s\nwant 403", err, out)
		}
		bad := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"erin"}}`
		if out, err := s.KubectlStdin(bad, "create", "--validate=false", "-f", "-"); err == nil || !strings.Contains(out, "exactly one of nonResourceAttributes or resourceAttributes must be specified") {
			t.Errorf("review without attributes: got %v\n%s\nwant 422", err, out)
		}
	})

	t.Run("token review", func(t *testing.T) {
		kc := filepath.Join(t.TempDir(), "frank.kubeconfig")
		if out, err := exec.Command(framework.Binary(t), "kubeconfig", "--data-dir", s.DataDir, "--user", "frank",
			"--group", "team-f", "--token", "--server", s.URL(), "-o", kc).CombinedOutput(); err != nil {
			t.Fatalf("portal kubeconfig --token: %v\n%s", err, out)
		}
		token := strings.TrimSpace(s.MustKubectl("--kubeconfig", kc, "config", "view", "--raw", "-o", "jsonpath={.users[0].user.token}"))
		var saToken string
		waitUntil(t, "the default ServiceAccount to get a token", func() bool {
			out, err := s.Kubectl("create", "token", "default", "-n", "a")
			saToken = strings.TrimSpace(out)
			return err == nil
		})
		vaultToken := strings.TrimSpace(s.MustKubectl("create", "token", "default", "-n", "a", "--audience", "vault"))
		for _, tc := range []struct {
			name, token   string
			audiences     string // spec.audiences as JSON; "" leaves them out
			authenticated bool
			user          string
			groups        []string
		}{
			{name: "minted token", token: token, authenticated: true, user: "frank", groups: []string{"team-f", "system:authenticated"}},
			{name: "service account token", token: saToken, authenticated: true, user: "system:serviceaccount:a:default",
				groups: []string{"system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"}},
			{name: "token for another audience, reviewed for it", token: vaultToken, audiences: `["vault"]`, authenticated: true,
				user: "system:serviceaccount:a:default", groups: []string{"system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"}},
			{name: "token for another audience, reviewed for the API's", token: vaultToken},
			{name: "API token, reviewed for another audience", token: saToken, audiences: `["vault"]`},
			{name: "unknown token", token: "not-a-token"},
		} {
			spec := `"token":"` + tc.token + `"`
			if tc.audiences != "" {
				spec += `,"audiences":` + tc.audiences
			}
			review := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{` + spec + `}}`
			out := s.MustKubectlStdin(review, "create", "--validate=false", "-f", "-", "-o", "json")
			if strings.Contains(out, tc.token) {
				t.Errorf("%s: the answer echoes the token:\n%s", tc.name, out)
			}
			var got struct {
				Status struct {
					Authenticated bool `json:"authenticated"`
					User          struct {
						Username string   `json:"username"`
						Groups   []string `json:"groups"`
					} `json:"user"`
				} `json:"status"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%s: %v\n%s", tc.name, err, out)
			}
			st := got.Status
			if st.Authenticated != tc.authenticated || st.User.Username != tc.user || strings.Join(st.User.Groups, ",") != strings.Join(tc.groups, ",") {
				t.Errorf("%s: got authenticated=%v as %q in %v, want %v as %q in %v", tc.name,
					st.Authenticated, st.User.Username, st.User.Groups, tc.authenticated, tc.user, tc.groups)
			}
		}
	})
}
