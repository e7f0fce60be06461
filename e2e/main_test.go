package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"portal.dev/portal/e2e/framework"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(grpcHealthEnv); addr != "" {
		os.Exit(serveGRPCHealth(addr, os.Getenv(grpcHealthFileEnv)))
	}
	if addr := os.Getenv(ingressBackendEnv); addr != "" {
		os.Exit(serveIngressBackend(addr))
	}
	before := hostDataPlane()
	code := m.Run()
	framework.Cleanup()
	// Data-plane tests run in namespaces of their own; a component that
	// programmed the host's kernel instead is a bug in the test setup.
	if after := hostDataPlane(); after != before {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left Portal's rules or links in the host namespace:\nbefore: %q\nafter:  %q\n", before, after)
		code = 1
	}
	os.Exit(code)
}

// hostDataPlane lists the nftables tables and links of Portal's making in
// this (the host's) network namespace; empty when not root.
func hostDataPlane() string {
	if os.Geteuid() != 0 {
		return ""
	}
	var found []string
	if out, err := exec.Command("nft", "list", "tables").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "portal") {
				found = append(found, line)
			}
		}
	}
	for _, link := range []string{"portal0", "portal-vip"} {
		if exec.Command("ip", "link", "show", link).Run() == nil {
			found = append(found, "link "+link)
		}
	}
	return strings.Join(found, "; ")
}
