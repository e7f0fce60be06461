package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"portal.dev/portal/e2e/framework"
)

// TestEncryptionAtRest: with --encryption-provider-config naming Secrets,
// a Secret created through the API is stored under the first provider's
// prefix with no plaintext in etcd, and reads back through the API; a
// ConfigMap, not named, stays readable in etcd. Each provider Portal
// supports is tried.
func TestEncryptionAtRest(t *testing.T) {
	// Two 32-byte keys, fixed: the test needs no secrecy, only keys.
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	for _, tc := range []struct {
		provider, prefix string
	}{
		{"aescbc", "k8s:enc:aescbc:v1:key1:"},
		{"secretbox", "k8s:enc:secretbox:v1:key1:"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			config := filepath.Join(t.TempDir(), "encryption.yaml")
			yaml := `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - ` + tc.provider + `:
      keys:
      - name: key1
        secret: ` + key + `
  - identity: {}
`
			if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			s := framework.StartServer(t, "--encryption-provider-config", config)
			const value = "plaintext-portal-encryption-e2e"
			s.MustKubectl("create", "secret", "generic", "at-rest", "--from-literal", "password="+value)
			s.MustKubectl("create", "configmap", "in-clear", "--from-literal", "note="+value)

			etcd := etcdOf(t, s)
			stored := func(key string) []byte {
				t.Helper()
				resp, err := etcd.Get(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Kvs) != 1 {
					t.Fatalf("etcd holds %d keys at %s, want 1", len(resp.Kvs), key)
				}
				return resp.Kvs[0].Value
			}
			secret := stored("/registry/secrets/default/at-rest")
			if !bytes.HasPrefix(secret, []byte(tc.prefix)) {
				t.Errorf("stored Secret starts %q, want the %s prefix %q", secret[:min(len(secret), 40)], tc.provider, tc.prefix)
			}
			if bytes.Contains(secret, []byte(value)) || bytes.Contains(secret, []byte("at-rest")) {
				t.Errorf("stored Secret holds plaintext: %q", secret)
			}
			if cm := stored("/registry/configmaps/default/in-clear"); !bytes.Contains(cm, []byte(value)) {
				t.Errorf("stored ConfigMap lacks its value in the clear, want only Secrets encrypted: %q", cm)
			}
			all, err := etcd.Get(context.Background(), "/registry/", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range all.Kvs {
				if bytes.Contains(kv.Value, []byte(value)) && !strings.HasPrefix(string(kv.Key), "/registry/configmaps/") {
					t.Errorf("etcd key %s holds the Secret's value in the clear", kv.Key)
				}
			}

			readBack := func(when string) {
				t.Helper()
				got := s.MustKubectl("get", "secret", "at-rest", "-o", "jsonpath={.data.password}")
				if dec, _ := base64.StdEncoding.DecodeString(got); string(dec) != value {
					t.Errorf("Secret read through the API %s: got %q, want %q", when, dec, value)
				}
			}
			readBack("")
			// A restart reads it from etcd again, past the watch cache.
			s.Stop()
			s.Start()
			readBack("after a restart")
		})
	}
}
