//go:build linux

package netlink

import (
	"fmt"
	"os/exec"
	"strings"
)

// MirroredNFT is the nft release whose netlink encoding the Writer
// copies: the expressions and registers of each rule, the set userdata
// `nft list` reads key byte order and typeof from, and the order it
// sends a run of elements in. Another release may do any of these
// differently, and the two paths would then write different tables for
// the same sync: `nft list` would print something else, and a sync nft
// writes after one the Writer wrote (or the other way round) would not
// find what it expects.
const MirroredNFT = "1.0.6"

// CheckNFTVersion returns nil if out, the output of `nft --version`,
// names MirroredNFT, else why it does not.
func CheckNFTVersion(out string) error {
	// "nftables v1.0.6 (Lester Gooch #5)"
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "nftables" || !strings.HasPrefix(f[1], "v") {
		return fmt.Errorf("unrecognised nft --version output %q", strings.TrimSpace(out))
	}
	if v := strings.TrimPrefix(f[1], "v"); v != MirroredNFT {
		return fmt.Errorf("nft is %s; the netlink writer mirrors nft %s", v, MirroredNFT)
	}
	return nil
}

// NFTVersion returns the output of the running `nft --version`.
func NFTVersion() (string, error) {
	out, err := exec.Command("nft", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("nft --version: %w", err)
	}
	return string(out), nil
}
