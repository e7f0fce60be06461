package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"

	"k8s.io/klog/v2"

	"portal.dev/portal/proxy/conntrack"
	"portal.dev/portal/proxy/iptables"
	"portal.dev/portal/proxy/leftovers"
	"portal.dev/portal/proxy/nftables"
	"portal.dev/portal/proxy/userspace"
)

// newKernelProxier returns the proxier of a kernel mode (o.Mode is
// nftables or iptables) and the conntrack tool it cleans stale UDP flows
// with. Each mode removes the other modes' leftovers before its first sync.
func newKernelProxier(o Options, cidrs []netip.Prefix) (Proxier, conntrack.Interface, error) {
	switch o.Mode {
	case ModeNFTables:
		p, err := nftables.New(nftables.Config{
			ClusterCIDRs:  cidrs,
			MasqueradeAll: o.MasqueradeAll,
			BeforeFirstSync: func(ctx context.Context) error {
				return errors.Join(leftovers.DeleteIPTables(ctx, nil), leftovers.DeleteVIPLink(ctx, nil))
			},
		})
		if err != nil {
			return nil, nil, fmt.Errorf("--proxy-mode nftables: %w", err)
		}
		return p, execConntrack(), nil
	case ModeIPTables:
		p, err := iptables.New(iptables.Config{
			ClusterCIDRs:  cidrs,
			MasqueradeAll: o.MasqueradeAll,
			BeforeFirstSync: func(ctx context.Context) error {
				return errors.Join(leftovers.DeleteNFTables(ctx), leftovers.DeleteVIPLink(ctx, nil))
			},
		})
		if err != nil {
			return nil, nil, fmt.Errorf("--proxy-mode iptables: %w", err)
		}
		return p, execConntrack(), nil
	}
	return nil, nil, fmt.Errorf("--proxy-mode %s: not a kernel mode", o.Mode)
}

// addVIPLink gives the userspace mode the VIP link for Service addresses
// when this process may add links and addresses (root; a finer capability
// check is not worth it), and has it remove the kernel modes' rules before
// its first sync.
func addVIPLink(cfg *userspace.Config) {
	if os.Geteuid() != 0 {
		klog.InfoS("Userspace proxy without root: serving NodePorts only; each Service's address is logged")
		return
	}
	cfg.VIPs = userspace.IPCommandVIPs{}
	cfg.BeforeFirstSync = func(ctx context.Context) error {
		return errors.Join(leftovers.DeleteNFTables(ctx), leftovers.DeleteIPTables(ctx, nil))
	}
}

// execConntrack returns the conntrack tool the kernel modes clean stale
// UDP flows with, or nil when it is not installed.
func execConntrack() conntrack.Interface {
	if _, err := exec.LookPath("conntrack"); err == nil {
		return conntrack.Exec{}
	}
	klog.InfoS("conntrack binary not found; stale UDP flows will not be cleared (install conntrack-tools)")
	return nil
}

// CleanupAll removes everything any Portal proxy mode wrote into the
// kernel: the nftables mode's tables, the iptables mode's chains and the
// userspace mode's VIP link.
func CleanupAll(ctx context.Context) error {
	return errors.Join(leftovers.DeleteNFTables(ctx), leftovers.DeleteIPTables(ctx, nil), leftovers.DeleteVIPLink(ctx, nil))
}
