package main

import (
	"strings"
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

// `portal server` takes the Ingress controller's flags; its own
// endpoints are prefixed so they do not collide with the API server's
// --bind-address or the other components' metrics.
func TestServerIngressFlags(t *testing.T) {
	fs := newServerCommand().Flags()
	for _, tc := range []struct{ flag, wantDefault, wantUsage string }{
		{"bind-address", "", "address the API listens on"},
		{"ingress-bind-address", "", "ingress: "},
		{"ingress-metrics-bind-address", "127.0.0.1:10254", "ingress: "},
		{"ingress-healthz-bind-address", "", "ingress: "},
		{"ingress-profiling", "false", "ingress: "},
		{"ingress-access-log", "true", "ingress: "},
		{"trust-forwarded-headers", "false", ""},
		{"http-port", "80", ""},
		{"https-port", "443", ""},
		{"ingress-class", "portal", ""},
		{"default-ssl-certificate", "", ""},
	} {
		f := fs.Lookup(tc.flag)
		switch {
		case f == nil:
			t.Errorf("--%s: missing", tc.flag)
		case tc.wantDefault != "" && f.DefValue != tc.wantDefault:
			t.Errorf("--%s: got default %q, want %q", tc.flag, f.DefValue, tc.wantDefault)
		case !strings.HasPrefix(f.Usage, tc.wantUsage):
			t.Errorf("--%s: got usage %q, want it to start with %q", tc.flag, f.Usage, tc.wantUsage)
		}
	}
	for _, flag := range []string{"profiling", "access-log"} {
		if f := fs.Lookup(flag); f != nil {
			t.Errorf("--%s: present unprefixed, want only --ingress-%s", flag, flag)
		}
	}
}
