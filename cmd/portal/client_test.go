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
