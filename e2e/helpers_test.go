package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// syncBuffer is a bytes.Buffer safe for a writer process and a reader test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventuallyWithin polls cond until it holds, and fails the test with
// what and cond's last detail once timeout has passed. Deadlines are
// generous: steps start processes on a machine other tests share.
func eventuallyWithin(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, timeout, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventually is eventuallyWithin for a step of the API alone, 20 s.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	eventuallyWithin(t, 20*time.Second, what, cond)
}

// waitFor is eventuallyWithin for a condition with nothing to report.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, timeout, "condition", func() (bool, string) { return cond(), "not met" })
}

// startAPIServer runs `portal server` in ns with the API and controllers
// only, for a bed whose agents the test runs itself. Node lifecycle
// leaves the agents' pods alone: the beds renew no Leases on time under
// load.
func startAPIServer(t *testing.T, ns *testbed.NS) *framework.Server {
	s := &framework.Server{Command: "server", DataDir: t.TempDir(), Port: 6443,
		Args: []string{"--disable", "dns,proxy,agent,ingress", "--node-monitor-grace-period", "1h"},
		Wrap: []string{"ip", "netns", "exec", ns.Name},
		Dial: ns.DialContext,
	}
	framework.Attach(t, s)
	s.Start()
	return s
}

// forwardAPI makes the API port of s, running in serverNS, answer on
// node's loopback too, so an agent there uses the same kubeconfig.
func forwardAPI(t *testing.T, s *framework.Server, serverNS, node *testbed.NS) {
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
	l, err := node.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := serverNS.DialContext(context.Background(), "tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
}

// logAgentOnFailure logs the last lines of the agent log at path when
// the test fails, or always with PORTAL_E2E_AGENT_LOG set.
func logAgentOnFailure(t *testing.T, what, path string, lines int) {
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PORTAL_E2E_AGENT_LOG") != "" {
			data, _ := os.ReadFile(path)
			all := strings.Split(string(data), "\n")
			t.Logf("last lines of %s:\n%s", what, strings.Join(all[max(0, len(all)-lines):], "\n"))
		}
	})
}
