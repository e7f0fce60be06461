package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"portal.dev/portal/e2e/framework"
)

// everythingPolicy logs every request with its bodies, the most a policy
// can ask for.
const everythingPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
`

// auditEvent is what the test reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Level      string `json:"level"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
}

// TestAuditLog: with --audit-log-path and a policy, a create is recorded
// in upstream's format with who did it, the verb, the resource and the
// response code; and neither a Secret's data nor a service account token
// (minted by TokenRequest, sent to TokenReview) is in any line, though the
// policy asks for every body.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(everythingPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	s := framework.StartServer(t, "--audit-log-path", logPath, "--audit-policy-file", policy)

	s.MustKubectl("create", "service", "clusterip", "audited", "--tcp", "80:8080")
	const secretValue = "hunter2-portal-audit-e2e"
	s.MustKubectl("create", "secret", "generic", "audited", "--from-literal", "password="+secretValue)
	s.MustKubectl("get", "secret", "audited", "-o", "yaml")
	var token string
	waitUntil(t, "the default ServiceAccount to get a token", func() bool {
		out, err := s.Kubectl("create", "token", "default")
		token = strings.TrimSpace(out)
		return err == nil
	})
	review := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"}}`
	s.MustKubectlStdin(review, "create", "--validate=false", "-f", "-")

	var serviceCreate, secretCreate, tokenReview *auditEvent
	eventually(t, "the creates in the audit log", func() (bool, string) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, err.Error()
		}
		for _, forbidden := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue)), token} {
			if bytes.Contains(data, []byte(forbidden)) {
				t.Fatalf("audit log holds a Secret's data or a token: %q", forbidden)
			}
		}
		serviceCreate, secretCreate, tokenReview = nil, nil, nil
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var ev auditEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("audit log line is not an Event: %v\n%s", err, sc.Bytes())
			}
			if ev.Verb != "create" || ev.Stage != "ResponseComplete" || ev.ObjectRef == nil {
				continue
			}
			switch {
			case ev.ObjectRef.Resource == "services" && ev.ObjectRef.Name == "audited":
				serviceCreate = &ev
			case ev.ObjectRef.Resource == "secrets" && ev.ObjectRef.Name == "audited":
				secretCreate = &ev
			case ev.ObjectRef.Resource == "tokenreviews":
				tokenReview = &ev
			}
		}
		// The TokenReview came last: once it is in, every request before it is.
		return serviceCreate != nil && secretCreate != nil && tokenReview != nil,
			"no ResponseComplete events yet for all of the Service, the Secret and the TokenReview"
	})

	ev := serviceCreate
	if ev.APIVersion != "audit.k8s.io/v1" || ev.Kind != "Event" {
		t.Errorf("got %s %s, want audit.k8s.io/v1 Event", ev.APIVersion, ev.Kind)
	}
	if ev.User.Username != "admin" || ev.ObjectRef.Namespace != "default" || ev.ResponseStatus == nil || ev.ResponseStatus.Code != 201 {
		t.Errorf("got user %q namespace %q status %+v, want admin creating in default with 201", ev.User.Username, ev.ObjectRef.Namespace, ev.ResponseStatus)
	}
	if ev.Level != "RequestResponse" || len(ev.RequestObject) == 0 {
		t.Errorf("got level %s with request body %d bytes, want the policy's RequestResponse with the body", ev.Level, len(ev.RequestObject))
	}
	if secretCreate.Level != "Metadata" || len(secretCreate.RequestObject) != 0 {
		t.Errorf("Secret create: got level %s with request body %s, want Metadata and no body", secretCreate.Level, secretCreate.RequestObject)
	}
	if tokenReview.Level != "Metadata" {
		t.Errorf("TokenReview: got level %s, want Metadata", tokenReview.Level)
	}
	if secretCreate.ResponseStatus == nil || secretCreate.ResponseStatus.Code != 201 {
		t.Errorf("Secret create: got status %+v, want 201", secretCreate.ResponseStatus)
	}
}
