package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"portal.dev/portal/internal/apilb"
)

func TestHealthCheck(t *testing.T) {
	tests := []struct {
		name         string
		status       int
		wantNotReady bool
	}{
		{name: "ready", status: http.StatusOK},
		{name: "cut from etcd quorum", status: http.StatusInternalServerError, wantNotReady: true},
		{name: "RBAC caches still syncing", status: http.StatusForbidden, wantNotReady: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			check, err := healthCheck(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			err = check(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
			if got := errors.Is(err, apilb.ErrNotReady); got != tc.wantNotReady {
				t.Errorf("answer %d: not ready %v (err %v), want %v", tc.status, got, err, tc.wantNotReady)
			}
			if !tc.wantNotReady && err != nil {
				t.Errorf("answer %d: err %v, want none", tc.status, err)
			}
		})
	}
}

// A plain-http kubeconfig must stay http behind the balancer, or the
// component speaks TLS to a plaintext server.
func TestLoadBalancerKeepsScheme(t *testing.T) {
	tests := []struct{ host, want string }{
		{host: "http://127.0.0.1:8080", want: "http://"},
		{host: "https://127.0.0.1:6443", want: "https://"},
		{host: "127.0.0.1:6443", want: "https://"},
	}
	for _, tc := range tests {
		t.Run(tc.host, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			through, err := withLoadBalancer(ctx, &rest.Config{Host: tc.host}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(through.Host, tc.want) {
				t.Errorf("host through the balancer %q, want scheme %q", through.Host, tc.want)
			}
		})
	}
}
