package main

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"portal.dev/portal/proxy"
)

// `portal server` without root falls back to the userspace proxy; the
// defaults that depend on the mode must be those of the mode it runs.
func TestSettleProxyMode(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		kernelModes bool
		wantMode    string
		wantMin     time.Duration
	}{
		{"root: nftables", nil, true, proxy.ModeNFTables, time.Second},
		{"no root: userspace", nil, false, proxy.ModeUserspace, 100 * time.Millisecond},
		{"no root, iptables asked", []string{"--proxy-mode", "iptables"}, false, proxy.ModeUserspace, 100 * time.Millisecond},
		{"no root, period given", []string{"--min-sync-period", "2s"}, false, proxy.ModeUserspace, 2 * time.Second},
		{"root, userspace asked", []string{"--proxy-mode", "userspace"}, true, proxy.ModeUserspace, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := proxy.DefaultOptions()
			fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
			addProxyFlags(fs, &o)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			settleProxyMode(fs, &o, tt.kernelModes)
			if o.Mode != tt.wantMode || o.MinSyncPeriod != tt.wantMin {
				t.Errorf("mode %s, min sync period %v; want %s, %v", o.Mode, o.MinSyncPeriod, tt.wantMode, tt.wantMin)
			}
		})
	}
}
