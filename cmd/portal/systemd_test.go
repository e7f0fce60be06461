package main

import (
	"os/exec"
	"testing"
)

// The systemd unit README.md installs passes `systemd-analyze verify`
// (hack/verify-systemd.sh); where systemd-analyze is missing the test
// skips, saying so.
func TestSystemdUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not found; packaging/portal.service not verified")
	}
	out, err := exec.Command("../../hack/verify-systemd.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("hack/verify-systemd.sh: %v\n%s", err, out)
	}
}
