package e2e

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
)

// `portal server --config FILE` takes flag values from the file, and the
// command line overrides them: the file's service range gives the
// kubernetes Service its address, while its secure-port gives way to the
// --secure-port the framework passes (the server answers there).
func TestServerConfigFile(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte("service-cluster-ip-range: 10.100.0.0/16\nsecure-port: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := framework.StartServer(t, "--config", config)
	svc, err := s.Client().CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := svc.Spec.ClusterIP, "10.100.0.1"; got != want {
		t.Errorf("kubernetes Service at %s, want %s (the file's service-cluster-ip-range)", got, want)
	}
}
