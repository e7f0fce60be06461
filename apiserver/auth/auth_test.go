package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestAnonymous(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		header             string
		peerCert           bool
		want               bool
	}{
		{"readyz", "GET", "/readyz", "", false, true},
		{"readyz check", "GET", "/readyz/etcd", "", false, true},
		{"healthz", "GET", "/healthz", "", false, true},
		{"livez", "GET", "/livez", "", false, true},
		{"version", "GET", "/version", "", false, true},
		{"resources", "GET", "/api/v1/pods", "", false, false},
		{"discovery", "GET", "/apis", "", false, false},
		{"readyz prefix trick", "GET", "/readyzz", "", false, false},
		{"post to readyz", "POST", "/readyz", "", false, false},
		{"failed token is not downgraded", "GET", "/readyz", "Bearer x", false, false},
		{"failed cert is not downgraded", "GET", "/readyz", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, "https://x"+tc.path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			if tc.peerCert {
				req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}}
			}
			_, ok, err := Anonymous.AuthenticateRequest(req)
			if err != nil || ok != tc.want {
				t.Fatalf("got %v (%v), want %v", ok, err, tc.want)
			}
		})
	}
}

func TestBuiltin(t *testing.T) {
	anon := &user.DefaultInfo{Name: user.Anonymous}
	bob := &user.DefaultInfo{Name: "bob", Groups: []string{user.AllAuthenticated}}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	for _, tc := range []struct {
		name string
		a    authorizer.AttributesRecord
		want authorizer.Decision
	}{
		{"anonymous readyz", authorizer.AttributesRecord{User: anon, Verb: "get", Path: "/readyz"}, authorizer.DecisionAllow},
		{"anonymous list pods", authorizer.AttributesRecord{User: anon, Verb: "list", Resource: "pods", ResourceRequest: true}, authorizer.DecisionDeny},
		{"anonymous create", authorizer.AttributesRecord{User: anon, Verb: "create", Resource: "services", ResourceRequest: true}, authorizer.DecisionDeny},
		{"anonymous metrics", authorizer.AttributesRecord{User: anon, Verb: "get", Path: "/metrics"}, authorizer.DecisionDeny},
		{"user create is for the modes to decide", authorizer.AttributesRecord{User: bob, Verb: "create", Resource: "services", ResourceRequest: true}, authorizer.DecisionNoOpinion},
		{"system:masters create", authorizer.AttributesRecord{User: admin, Verb: "create", Resource: "services", ResourceRequest: true}, authorizer.DecisionAllow},
		{"no user", authorizer.AttributesRecord{Verb: "get", Path: "/readyz"}, authorizer.DecisionDeny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, _ := Builtin.Authorize(context.Background(), tc.a)
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	f := NewTokenFile(path)
	if _, ok, err := f.AuthenticateToken(context.Background(), "abc"); ok || err != nil {
		t.Fatalf("missing file: got %v %v, want not authenticated", ok, err)
	}
	if err := AppendToken(path, "secret-1", "alice", []string{"system:masters", "dev"}); err != nil {
		t.Fatal(err)
	}
	resp, ok, err := f.AuthenticateToken(context.Background(), "secret-1")
	if !ok || err != nil {
		t.Fatalf("got %v %v, want authenticated", ok, err)
	}
	if resp.User.GetName() != "alice" || len(resp.User.GetGroups()) != 2 || resp.User.GetGroups()[1] != "dev" {
		t.Fatalf("got user %+v", resp.User)
	}
	// A token added later is picked up without a restart.
	if err := AppendToken(path, "secret-2", "carol", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.AuthenticateToken(context.Background(), "secret-2"); !ok {
		t.Fatal("token appended later not accepted")
	}
	if _, ok, _ := f.AuthenticateToken(context.Background(), "secret-3"); ok {
		t.Fatal("unknown token accepted")
	}
}
