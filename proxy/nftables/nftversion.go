//go:build linux

package nftables

import (
	"fmt"
	"os/exec"
	"strings"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"
)

// mirroredNFT is the nft release whose netlink encoding the netlink
// writer copies: the expressions and registers of each rule, the set
// userdata `nft list` reads key byte order and typeof from, and the
// order it sends a run of elements in. Another release may do any of
// these differently, and the two paths would then write different
// tables for the same sync: `nft list` would print something else, and
// a sync nft writes after one netlink wrote (or the other way round)
// would not find what it expects.
const mirroredNFT = "1.0.6"

// checkNFTVersion returns nil if out, the output of `nft --version`,
// names the release the netlink writer mirrors, else why it does not.
func checkNFTVersion(out string) error {
	// "nftables v1.0.6 (Lester Gooch #5)"
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "nftables" || !strings.HasPrefix(f[1], "v") {
		return fmt.Errorf("unrecognised nft --version output %q", strings.TrimSpace(out))
	}
	if v := strings.TrimPrefix(f[1], "v"); v != mirroredNFT {
		return fmt.Errorf("nft is %s; the netlink writer mirrors nft %s", v, mirroredNFT)
	}
	return nil
}

// nftVersion returns the output of the running `nft --version`.
func nftVersion() (string, error) {
	out, err := exec.Command("nft", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("nft --version: %w", err)
	}
	return string(out), nil
}

// useNetlink gives each family the netlink writer if version, the
// output of `nft --version` (or the error running it), says the running
// nft writes what the writer does. If not, every sync goes through nft:
// slower, but the table is what nft makes of it.
func (p *Proxier) useNetlink(version string, err error) {
	if err == nil {
		err = checkNFTVersion(version)
	}
	if err != nil {
		klog.InfoS("Netlink writer off; every sync goes through nft", "reason", err)
		return
	}
	for _, fp := range p.families {
		family := knftables.IPv4Family
		if fp.b.ip == "ip6" {
			family = knftables.IPv6Family
		}
		fp.batch = newNetlinkWriter(family, tableName)
	}
}
