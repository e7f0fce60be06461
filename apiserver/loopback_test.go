package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The server's clients of itself must not ask for compressed responses:
// k8s.io/apiserver compresses each event of their watch-list streams with a
// gzip writer of over a MiB, which an idle server kept allocating anew.
func TestOwnClientsAskForNoCompression(t *testing.T) {
	tests := []struct {
		name   string
		config func(t *testing.T) *rest.Config
	}{
		{"loopback", func(*testing.T) *rest.Config {
			c := &rest.Config{}
			tuneLoopback(c)
			return c
		}},
		{"component", func(t *testing.T) *rest.Config {
			c, err := ComponentConfig(Options{DataDir: t.TempDir(), SecurePort: 1}, "system:kube-controller-manager")
			if err != nil {
				t.Fatal(err)
			}
			return c
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Get("Accept-Encoding")
				http.Error(w, "not found", http.StatusNotFound)
			}))
			defer srv.Close()
			c := tc.config(t)
			c.Host, c.TLSClientConfig = srv.URL, rest.TLSClientConfig{Insecure: true}
			client, err := kubernetes.NewForConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			client.CoreV1().ConfigMaps("default").Get(context.Background(), "any", metav1.GetOptions{})
			if enc := <-got; enc != "" {
				t.Errorf("request Accept-Encoding = %q, want none", enc)
			}
		})
	}
}
