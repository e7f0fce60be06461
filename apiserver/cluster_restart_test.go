package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"portal.dev/portal/apiserver/embeddedetcd"
)

// memberDataDir is a data directory that holds an etcd member, with the
// cluster ID recorded when recorded is set.
func memberDataDir(t *testing.T, recorded bool) string {
	t.Helper()
	dir := t.TempDir()
	wal := filepath.Join(dir, "etcd", "member", "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wal, "0000000000000000-0000000000000000.wal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if recorded {
		if err := os.WriteFile(filepath.Join(dir, "etcd-cluster-id"), []byte("abc\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPrepareJoinOfAMemberAsksNothing(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name     string
		recorded bool
		wantErr  string
	}{
		{name: "member of a cluster", recorded: true},
		{name: "single server's data", recorded: false, wantErr: "single server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{DataDir: memberDataDir(t, tc.recorded),
				Cluster: ClusterOptions{Join: srv.URL, Token: "a-long-enough-secret-for-joining"}}
			m := &embeddedetcd.Cluster{Name: "s3"}
			err := prepareJoin(context.Background(), o, m)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("prepareJoin: %v, want the member restarted", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("prepareJoin: %v, want an error saying %q", err, tc.wantErr)
			}
			if n := asked.Load(); n != 0 {
				t.Errorf("the --join target was asked %d times, want none", n)
			}
			if m.Join != nil {
				t.Errorf("m.Join = %+v, want nil: a member restarts, it does not join", m.Join)
			}
		})
	}
}
