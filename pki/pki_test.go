package pki

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestCAAndCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "ca.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key mode: got %o, want 600", st.Mode().Perm())
	}
	again, err := LoadOrCreateCA(dir, "ca")
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("second load: got a different CA (%v)", err)
	}

	certPath, keyPath := filepath.Join(dir, "s.crt"), filepath.Join(dir, "s.key")
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	if err := ca.EnsureServing(certPath, keyPath, []string{"localhost", "kubernetes.default.svc"}, ips); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(certPath)
	if err := ca.EnsureServing(certPath, keyPath, []string{"localhost"}, ips[:1]); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(certPath); string(after) != string(before) {
		t.Fatal("a covering serving certificate was reissued")
	}
	if err := ca.EnsureServing(certPath, keyPath, []string{"new-name"}, nil); err != nil {
		t.Fatal(err)
	}
	cert := parse(t, mustRead(t, certPath))
	if err := cert.VerifyHostname("new-name"); err != nil {
		t.Fatalf("reissued certificate: %v", err)
	}

	certPEM, _, err := ca.IssueClient("alice", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	client := parse(t, certPEM)
	if client.Subject.CommonName != "alice" || client.Subject.Organization[0] != "system:masters" {
		t.Fatalf("client subject: got %v", client.Subject)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate does not verify against the CA: %v", err)
	}
}

func TestWriteKubeconfigIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kc")
	if err := WriteKubeconfig(path, Kubeconfig{Server: "https://127.0.0.1:6443", User: "u", Token: "t"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode: got %o, want 600", st.Mode().Perm())
	}
}

func mustRead(t *testing.T, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func parse(t *testing.T, data []byte) *x509.Certificate {
	block, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
