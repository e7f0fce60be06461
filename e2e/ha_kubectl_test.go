package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// kubectlIn runs kubectl inside ns with kubeconfig, with a timeout a
// person would give up after: the kubectl on PATH when there is one, else
// the one built into portal.
func kubectlIn(t *testing.T, ns *testbed.NS, kubeconfig string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	argv := []string{"ip", "netns", "exec", ns.Name}
	if path, err := exec.LookPath("kubectl"); err == nil {
		argv = append(argv, path)
	} else {
		argv = append(argv, framework.Binary(t), "kubectl")
	}
	argv = append(argv, "--kubeconfig", kubeconfig, "--request-timeout", "5s")
	out, err := exec.CommandContext(ctx, argv[0], append(argv[1:], args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestHAKubectlFailover: an administrator's machine on the LAN runs
// `portal api-lb` with a kubeconfig for s1 and --server naming s2 and s3,
// and kubectl uses the kubeconfig the balancer writes. kill -9 of s1, the
// server the balancer starts on, costs kubectl a few seconds at most: the
// same kubeconfig reads and writes through another server.
func TestHAKubectlFailover(t *testing.T) {
	b := newHABed(t, 3)
	b.Start()
	s1, s2, s3 := b.Nodes[0], b.Nodes[1], b.Nodes[2]
	admin, _ := b.Attach("admin")
	dir := t.TempDir()
	kc, lbKC := filepath.Join(dir, "admin.kubeconfig"), filepath.Join(dir, "lb.kubeconfig")
	if out, err := exec.Command(framework.Binary(t), "kubeconfig", "--data-dir", s1.DataDir, "--user", "ha-admin",
		"--group", "system:masters", "--server", s1.URL(), "-o", kc).CombinedOutput(); err != nil {
		t.Fatalf("portal kubeconfig: %v\n%s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, "api-lb.log"))
	if err != nil {
		t.Fatal(err)
	}
	logAgentOnFailure(t, "the api-lb log", log.Name(), 30)
	admin.Start(log, framework.Binary(t), "api-lb", "--kubeconfig", kc, "--server", s2.URL()+","+s3.URL(),
		"--write-kubeconfig", lbKC, "-v=2")
	eventually(t, "kubectl through the balancer", func() (bool, string) {
		out, err := kubectlIn(t, admin, lbKC, "create", "configmap", "before-kill")
		return err == nil, out
	})

	s1.Server.Kill()
	killed := time.Now()
	var failed int
	var lastErr string
	eventuallyWithin(t, 30*time.Second, "kubectl reads through another server after s1's kill", func() (bool, string) {
		out, err := kubectlIn(t, admin, lbKC, "get", "configmap", "before-kill", "-o", "name")
		if err != nil || out != "configmap/before-kill" {
			failed++
			lastErr = out
			return false, out
		}
		return true, ""
	})
	took := time.Since(killed)
	t.Logf("kubectl read through the balancer %v after s1's kill, after %d failed commands (last: %.200s)",
		took.Round(10*time.Millisecond), failed, lastErr)
	// The balancer dials s1, is refused and moves on at once; a read may
	// also wait for etcd to elect another leader if s1's member led.
	if took > 15*time.Second {
		t.Errorf("kubectl read again after %v, want at most 15 s", took)
	}
	eventuallyWithin(t, 15*time.Second, "kubectl writes after s1's kill", func() (bool, string) {
		out, err := kubectlIn(t, admin, lbKC, "create", "configmap", "after-kill")
		return err == nil, out
	})
	out, err := kubectlIn(t, admin, lbKC, "get", "configmaps", "-o", "name")
	if err != nil || !strings.Contains(out, "configmap/before-kill") || !strings.Contains(out, "configmap/after-kill") {
		t.Errorf("kubectl get configmaps after the failover: %v\n%s\nwant before-kill and after-kill", err, out)
	}
}
