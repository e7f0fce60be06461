package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"

	"portal.dev/portal/internal/cidrflag"
	"portal.dev/portal/proxy/leftovers"
	"portal.dev/portal/proxy/userspace"
)

// Proxy modes (--proxy-mode).
const (
	ModeNFTables  = "nftables"
	ModeIPTables  = "iptables"
	ModeUserspace = "userspace"
)

// Options configure the proxy; flag names follow kube-proxy. The zero
// value works: empty fields take the defaults DefaultOptions documents,
// except the bind addresses, where empty means "do not serve".
type Options struct {
	// Mode is --proxy-mode (default nftables).
	Mode string
	// HostnameOverride is --hostname-override: this node's name as the
	// API knows it (default: the host name, lower-cased).
	HostnameOverride string
	// NodePortAddresses is --nodeport-addresses: CIDRs, or "primary" (the
	// node's primary IPs), or "all"; empty means all local addresses.
	NodePortAddresses []string
	// ClusterCIDR is --cluster-cidr: the pod CIDRs, comma-separated, at
	// most one per family; empty means unknown.
	ClusterCIDR string
	// MasqueradeAll is --masquerade-all: SNAT all traffic to cluster IPs.
	MasqueradeAll bool
	// MinSyncPeriod is --min-sync-period: syncs are limited to one per
	// MinSyncPeriod after a burst of runner.Burst (default 1s when zero
	// and SyncPeriod is zero too; an explicit 0 is allowed with a set
	// SyncPeriod). The flag's default depends on the mode:
	// DefaultMinSyncPeriod.
	MinSyncPeriod time.Duration
	// SyncPeriod is --sync-period: how often the proxy syncs even when
	// nothing changed (default 30s); the first such sync after
	// FullSyncPeriod rewrites every rule.
	SyncPeriod time.Duration
	// HealthzBindAddress is --healthz-bind-address, serving /healthz and
	// /livez (default 0.0.0.0:10256).
	HealthzBindAddress string
	// MetricsBindAddress is --metrics-bind-address, serving /metrics
	// (default 127.0.0.1:10249).
	MetricsBindAddress string
	// Scheduler is --scheduler: the userspace mode's default scheduler
	// (rr, random, lc, sh, dh, sed, nq, maglev; default rr). A Service
	// overrides it with the portal.dev/scheduler annotation.
	Scheduler string
	// DrainTimeout is --drain-timeout: in userspace mode, how long the
	// connections of an endpoint that left may go on (default 30s).
	DrainTimeout time.Duration
	// Cleanup is --cleanup: remove what any Portal proxy mode wrote into
	// the kernel, then exit.
	Cleanup bool
}

// DefaultMinSyncPeriod is the --min-sync-period of mode when the flag is
// not given: kube-proxy's 1s, which spares the kernel modes a rewrite per
// change, and 100ms for the userspace mode, whose sync only swaps routes
// in memory. Upstream sets the default per mode too (0 for IPVS), and
// its userspace mode applied endpoint changes at once. At 1s a steady stream of changes (one a second is enough) makes
// every change wait for the next slot, so a backend that turns not-ready
// could stay in rotation for more than a second.
func DefaultMinSyncPeriod(mode string) time.Duration {
	if mode == ModeUserspace {
		return 100 * time.Millisecond
	}
	return time.Second
}

// DefaultOptions returns kube-proxy's defaults.
func DefaultOptions() Options {
	return Options{
		Mode:               ModeNFTables,
		MinSyncPeriod:      time.Second,
		SyncPeriod:         30 * time.Second,
		HealthzBindAddress: "0.0.0.0:10256",
		MetricsBindAddress: "127.0.0.1:10249",
	}
}

// withDefaults fills the zero fields that have defaults.
func (o Options) withDefaults() Options {
	if o.Mode == "" {
		o.Mode = ModeNFTables
	}
	if o.SyncPeriod == 0 {
		o.SyncPeriod = 30 * time.Second
		if o.MinSyncPeriod == 0 {
			o.MinSyncPeriod = time.Second
		}
	}
	return o
}

// Validate checks the options; errors name the flag at fault.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch o.Mode {
	case ModeNFTables, ModeIPTables, ModeUserspace:
	default:
		return fmt.Errorf("--proxy-mode: unknown mode %q (want %s, %s or %s)", o.Mode, ModeUserspace, ModeNFTables, ModeIPTables)
	}
	if err := needsLinux(o, runtime.GOOS); err != nil {
		return err
	}
	if o.Scheduler != "" && !userspace.ValidScheduler(o.Scheduler) {
		return fmt.Errorf("--scheduler: unknown scheduler %q (want one of %s)", o.Scheduler, strings.Join(userspace.Schedulers, ", "))
	}
	if o.DrainTimeout < 0 {
		return fmt.Errorf("--drain-timeout must not be negative, got %s", o.DrainTimeout)
	}
	if _, err := parseNodePortAddresses(o.NodePortAddresses); err != nil {
		return err
	}
	if _, err := parseClusterCIDRs(o.ClusterCIDR); err != nil {
		return err
	}
	if o.SyncPeriod < 0 {
		return fmt.Errorf("--sync-period must be positive, got %s", o.SyncPeriod)
	}
	if o.MinSyncPeriod < 0 {
		return fmt.Errorf("--min-sync-period must not be negative, got %s", o.MinSyncPeriod)
	}
	if o.MinSyncPeriod > o.SyncPeriod {
		return fmt.Errorf("--min-sync-period (%s) must not exceed --sync-period (%s)", o.MinSyncPeriod, o.SyncPeriod)
	}
	for flag, addr := range map[string]string{"--healthz-bind-address": o.HealthzBindAddress, "--metrics-bind-address": o.MetricsBindAddress} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s: want host:port, got %q: %w", flag, addr, err)
		}
	}
	return nil
}

// needsLinux reports what in o cannot run on goos (runtime.GOOS), naming
// the flag: the kernel modes program Linux's nftables or iptables, and
// --cleanup removes what they and the userspace mode's Linux link wrote,
// so elsewhere it would have nothing to remove and must not pretend it did.
// Off Linux the userspace mode runs, without its VIP link.
func needsLinux(o Options, goos string) error {
	switch {
	case goos == "linux":
		return nil
	case o.Cleanup:
		return fmt.Errorf("--cleanup needs Linux (this is %s): it removes the nftables tables, iptables chains and %s link that Portal's proxy writes on Linux", goos, leftovers.VIPLink)
	case o.Mode != ModeUserspace:
		return fmt.Errorf("--proxy-mode %s needs Linux (this is %s); --proxy-mode %s runs here", o.Mode, goos, ModeUserspace)
	}
	return nil
}

// hostname returns the node name: --hostname-override or the host name,
// lower-cased as Node names are.
func (o Options) hostname() (string, error) {
	name := strings.TrimSpace(o.HostnameOverride)
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("host name (set --hostname-override): %w", err)
		}
		name = h
	}
	return strings.ToLower(name), nil
}

// nodePortSpec is a parsed --nodeport-addresses.
type nodePortSpec struct {
	all     bool
	primary bool
	cidrs   []netip.Prefix
}

func parseNodePortAddresses(in []string) (nodePortSpec, error) {
	var spec nodePortSpec
	var words []string
	for _, s := range in {
		for _, w := range strings.Split(s, ",") {
			if w = strings.TrimSpace(w); w != "" {
				words = append(words, w)
			}
		}
	}
	if len(words) == 0 {
		spec.all = true
		return spec, nil
	}
	for _, w := range words {
		switch w {
		case "all", "primary":
			if len(words) > 1 {
				return spec, fmt.Errorf("--nodeport-addresses: %q must be given alone", w)
			}
			spec.all, spec.primary = w == "all", w == "primary"
		default:
			p, err := netip.ParsePrefix(w)
			if err != nil {
				return spec, fmt.Errorf("--nodeport-addresses: %q is not a CIDR, \"primary\" or \"all\"", w)
			}
			spec.cidrs = append(spec.cidrs, p.Masked())
		}
	}
	return spec, nil
}

// parseClusterCIDRs reads --cluster-cidr by the rule the controller
// manager and the agent read it with, so the proxy masquerades by the same
// ranges node IPAM hands out.
func parseClusterCIDRs(s string) ([]netip.Prefix, error) {
	return cidrflag.Parse("--cluster-cidr", s)
}
