package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// metadataPolicy logs every request at Metadata: who, what, the code.
const metadataPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// TestServerComponentIdentities: the components inside `portal server`
// authenticate as the identities issue #19 names, read from the audit
// log: each component's requests (told apart by its user agent,
// portal-USER) carry that user, the node agent's with the system:nodes
// group, and none of them is an administrator.
func TestServerComponentIdentities(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(metadataPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	newTokenBed(t, "--audit-log-path", logPath, "--audit-policy-file", policy)

	want := map[string][]string{ // user: groups it must hold
		"system:kube-proxy":              nil,
		"system:node:node1":              {"system:nodes"},
		"system:kube-controller-manager": nil,
		"system:kube-dns":                nil,
	}
	eventuallyWithin(t, 60*time.Second, "a request of every component in the audit log", func() (bool, string) {
		seen, err := componentUsers(logPath)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for user := range want {
			if _, ok := seen[user]; !ok {
				missing = append(missing, user)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no request from %v yet", missing)
	})
	seen, _ := componentUsers(logPath)
	for user, groups := range want {
		for _, g := range groups {
			if !slices.Contains(seen[user], g) {
				t.Errorf("%s: groups %v lack %s", user, seen[user], g)
			}
		}
		if slices.Contains(seen[user], "system:masters") {
			t.Errorf("%s is in system:masters", user)
		}
	}
}

// componentUsers reads the audit log and returns, for each component user
// agent portal-USER, the groups its requests carried. A request whose user
// is not the one its user agent names fails the read.
func componentUsers(logPath string) (map[string][]string, error) {
	data, err := os.ReadFile(logPath)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	seen := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"user"`
			RequestURI string `json:"requestURI"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit line %.200q: %v", sc.Text(), err)
		}
		name, ok := strings.CutPrefix(ev.UserAgent, "portal-")
		if !ok || !strings.HasPrefix(name, "system:") {
			continue
		}
		// The user agent may carry more after the identity (client-go
		// appends nothing, but a component might).
		name, _, _ = strings.Cut(name, " ")
		if ev.User.Username != name {
			return nil, fmt.Errorf("a request with user agent %q (%s) was made as %q", ev.UserAgent, ev.RequestURI, ev.User.Username)
		}
		seen[name] = append(seen[name], ev.User.Groups...)
	}
	return seen, sc.Err()
}
