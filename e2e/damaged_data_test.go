package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/e2e/framework"
)

// TestServerOnDamagedDataDir pins issue 23: `portal server` on a copy of a
// data dir whose etcd WAL was cut in half hung forever without a word, and
// on one whose WAL was empty it panicked. It must end within 10 s with a
// message that names the file and says what to do.
func TestServerOnDamagedDataDir(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "configmap", "kept", "--from-literal=k=v")
	s.Stop()

	tests := []struct {
		name   string
		damage func(t *testing.T, wal string)
	}{{
		name: "WAL cut in half",
		damage: func(t *testing.T, wal string) {
			data, err := os.ReadFile(wal)
			if err != nil {
				t.Fatal(err)
			}
			// The file is preallocated: half of its records, not half of
			// its zeros.
			used := len(bytes.TrimRight(data, "\x00"))
			if err := os.Truncate(wal, int64(used/2)); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "empty WAL",
		damage: func(t *testing.T, wal string) {
			if err := os.Truncate(wal, 0); err != nil {
				t.Fatal(err)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(s.DataDir)); err != nil {
				t.Fatal(err)
			}
			wals, _ := filepath.Glob(filepath.Join(dir, "etcd", "member", "wal", "*.wal"))
			if len(wals) == 0 {
				t.Fatal("the data dir holds no etcd WAL")
			}
			wal := wals[len(wals)-1]
			tc.damage(t, wal)

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, framework.Binary(t), "server", "--data-dir", dir,
				"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(framework.FreePort(t)),
				"--disable", "proxy,agent", "--dns-port", fmt.Sprint(framework.FreePort(t)),
				"--dns-health-bind-address", "127.0.0.1:0", "--dns-ready-bind-address", "127.0.0.1:0",
				"--dns-metrics-bind-address", "127.0.0.1:0")
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			if err == nil {
				t.Fatalf("portal server exited 0 on a damaged data dir:\n%s", out)
			}
			if took > 10*time.Second {
				t.Errorf("portal server ended after %s, want within 10s", took.Round(time.Millisecond))
			}
			if strings.Contains(string(out), "panic") {
				t.Errorf("portal server panicked:\n%s", out)
			}
			for _, want := range []string{wal, "restore the data directory", "move it away"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("got output\n%s\nwant it to say %q", out, want)
				}
			}
		})
	}
}
