//go:build linux

// Package netnstest runs a test inside a throwaway network namespace: the
// test binary re-executes itself under `unshare --net`, so the rules and
// conntrack entries a kernel test makes never reach the host's.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// parentEnv carries the parent's network namespace to the child, which
// refuses to go on in the same one.
const parentEnv = "PORTAL_NETNS_TEST_PARENT"

// Enter reports whether the caller runs in a namespace of its own and may
// touch the kernel. In the test process it skips the test without root or
// without bins, else runs the test (t.Name(), a top-level test) again
// under `unshare --net`, logs that run's output, fails when it failed, and
// returns false.
func Enter(t *testing.T, bins ...string) bool {
	t.Helper()
	self, err := netnsInode()
	if err != nil {
		t.Fatalf("network namespace of the test: %v", err)
	}
	if parent := os.Getenv(parentEnv); parent != "" {
		if parent == self {
			t.Fatal("refusing to run kernel checks in the parent's network namespace")
		}
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root, to use the kernel inside a throwaway network namespace (unshare --net); CI runs as root")
	}
	for _, bin := range append([]string{"unshare"}, bins...) {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("skipped: %s not installed", bin)
		}
	}
	cmd := exec.Command("unshare", "--net", "--", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.timeout=20m", "-test.v")
	cmd.Env = append(os.Environ(), parentEnv+"="+self)
	out, err := cmd.CombinedOutput()
	t.Logf("in a private network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("kernel test failed: %v", err)
	}
	return false
}

func netnsInode() (string, error) {
	fi, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		return "", err
	}
	return fmt.Sprint(fi.Sys().(*syscall.Stat_t).Ino), nil
}
