package main

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// The copy `portal api-lb --write-kubeconfig` writes reaches the balancer
// with the original's credential, wherever the copy lies.
func TestPointKubeconfigAt(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "admin.kubeconfig")
	os.WriteFile(from, []byte(`apiVersion: v1
kind: Config
clusters:
- name: portal
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority: pki/ca.crt
contexts:
- name: portal
  context: {cluster: portal, user: admin}
current-context: portal
users:
- name: admin
  user: {token: secret}
`), 0o600)
	to := filepath.Join(t.TempDir(), "lb.kubeconfig")
	if err := pointKubeconfigAt(from, to, "https://127.0.0.1:6444"); err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(to)
	if err != nil {
		t.Fatal(err)
	}
	c := kc.Clusters["portal"]
	if got, want := c.Server, "https://127.0.0.1:6444"; got != want {
		t.Errorf("server: got %s, want %s", got, want)
	}
	if got, want := c.CertificateAuthority, filepath.Join(dir, "pki", "ca.crt"); got != want {
		t.Errorf("certificate-authority: got %s, want %s", got, want)
	}
	if got := kc.AuthInfos["admin"].Token; got != "secret" {
		t.Errorf("token: got %q, want the original's", got)
	}
	if fi, err := os.Stat(to); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of the copy: %v %v, want 0600", fi.Mode(), err)
	}

	if err := pointKubeconfigAt(filepath.Join(dir, "missing"), to, "https://127.0.0.1:6444"); err == nil {
		t.Error("a missing kubeconfig: got no error")
	}
}
