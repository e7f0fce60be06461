package main

import (
	"io"
	"strings"
	"testing"
)

// Every flag that names IP ranges refuses a CIDR with host bits, with the
// same words, in every command that reads it. Issue #16 found the proxy
// masking --cluster-cidr silently where the controller manager refused it,
// and the agent reading it with a third parser.
func TestCIDRFlagsRefuseHostBits(t *testing.T) {
	const bad = "10.244.1.0/16"
	const want = "10.244.1.0/16 has host bits set (did you mean 10.244.0.0/16?)"
	dataDir := t.TempDir()
	// Should a range get through, these make the command fail before it
	// starts anything: the proxy and the agent have no --kubeconfig, and
	// the API server refuses a loopback --advertise-address right after it
	// reads its range.
	apiArgs := []string{"--data-dir", dataDir, "--advertise-address", "127.0.0.1"}
	serverArgs := append([]string{"--disable", "controllers,dns,proxy,agent"}, apiArgs...)
	tests := []struct {
		name string
		args []string
		flag string
	}{
		{"controller-manager", []string{"controller-manager", "--cluster-cidr", bad}, "--cluster-cidr"},
		{"proxy", []string{"proxy", "--cluster-cidr", bad}, "--cluster-cidr"},
		{"agent cluster CIDR", []string{"agent", "--cluster-cidr", bad}, "--cluster-cidr"},
		{"agent pod CIDR", []string{"agent", "--pod-cidr", bad}, "--pod-cidr"},
		{"apiserver", append([]string{"apiserver", "--service-cluster-ip-range", bad}, apiArgs...), "--service-cluster-ip-range"},
		{"server cluster CIDR", append([]string{"server", "--cluster-cidr", bad}, serverArgs...), "--cluster-cidr"},
		{"server pod CIDR", append([]string{"server", "--pod-cidr", bad}, serverArgs...), "--pod-cidr"},
		{"server service range", append([]string{"server", "--service-cluster-ip-range", bad}, serverArgs...), "--service-cluster-ip-range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := newRootCommand()
			root.SetArgs(tc.args)
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			err := root.ExecuteContext(t.Context())
			if err == nil {
				t.Fatalf("portal %s: got no error, want %q", strings.Join(tc.args, " "), want)
			}
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("portal %s: got error %q, want one naming %s and saying %q", strings.Join(tc.args, " "), err, tc.flag, want)
			}
		})
	}
}
