package userspace

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"portal.dev/portal/proxy/leftovers"
)

// VIPLink is the interface the Service addresses are put on. This kernel
// has no dummy link type, so it is a bridge with no ports: addresses on it
// are local (the kernel adds them to the local routing table when the
// link is up, carrier or not) and nothing is ever forwarded through it.
const VIPLink = leftovers.VIPLink

// VIPs keeps a set of addresses on the VIP link.
type VIPs interface {
	Sync(ctx context.Context, want []netip.Addr) error
	// Delete removes the link and every address on it.
	Delete(ctx context.Context) error
}

// IPCommandVIPs manages the VIP link with the ip command.
type IPCommandVIPs struct {
	// Run runs commands (nil: os/exec).
	Run leftovers.Runner
}

func (v IPCommandVIPs) run(ctx context.Context, args ...string) (string, error) {
	run := v.Run
	if run == nil {
		run = leftovers.ExecRunner
	}
	return run(ctx, "ip", args, "")
}

// Sync makes the link's addresses exactly want, creating the link if needed.
func (v IPCommandVIPs) Sync(ctx context.Context, want []netip.Addr) error {
	out, err := v.run(ctx, "-o", "addr", "show", "dev", VIPLink)
	if err != nil {
		if _, err := v.run(ctx, "link", "add", VIPLink, "type", "bridge"); err != nil {
			return fmt.Errorf("create %s: %w", VIPLink, err)
		}
		out = ""
	}
	if _, err := v.run(ctx, "link", "set", VIPLink, "up"); err != nil {
		return err
	}
	have := parseAddrShow(out)
	wantSet := map[netip.Addr]bool{}
	var batch strings.Builder
	for _, a := range want {
		wantSet[a] = true
		if !have[a] {
			batch.WriteString("addr add " + hostPrefix(a) + " dev " + VIPLink + nodad(a) + "\n")
		}
	}
	for a := range have {
		if !wantSet[a] {
			batch.WriteString("addr del " + hostPrefix(a) + " dev " + VIPLink + "\n")
		}
	}
	if batch.Len() == 0 {
		return nil
	}
	run := v.Run
	if run == nil {
		run = leftovers.ExecRunner
	}
	if _, err := run(ctx, "ip", []string{"-force", "-batch", "-"}, batch.String()); err != nil {
		return fmt.Errorf("addresses on %s: %w", VIPLink, err)
	}
	return nil
}

// Delete removes the VIP link.
func (v IPCommandVIPs) Delete(ctx context.Context) error {
	if _, err := v.run(ctx, "link", "show", VIPLink); err != nil {
		return nil // not there
	}
	_, err := v.run(ctx, "link", "del", VIPLink)
	return err
}

func hostPrefix(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

func nodad(a netip.Addr) string {
	if a.Is6() {
		return " nodad"
	}
	return ""
}

// parseAddrShow reads `ip -o addr show` output, skipping link-local.
func parseAddrShow(out string) map[netip.Addr]bool {
	have := map[netip.Addr]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" && f[i] != "inet6" {
				continue
			}
			if p, err := netip.ParsePrefix(f[i+1]); err == nil && !p.Addr().IsLinkLocalUnicast() {
				have[p.Addr()] = true
			}
		}
	}
	return have
}
