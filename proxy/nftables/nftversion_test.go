//go:build linux

package nftables

import (
	"errors"
	"testing"
)

// TestNetlinkOnlyWithMirroredNFT: a running nft of another release (or
// none answering) leaves every sync to nft; the mirrored one gets the
// netlink writer for both families.
func TestNetlinkOnlyWithMirroredNFT(t *testing.T) {
	for _, tc := range []struct {
		name    string
		out     string
		err     error
		netlink bool
	}{
		{"mirrored", "nftables v1.0.6 (Lester Gooch #5)", nil, true},
		{"other release", "nftables v1.0.9 (Old Doc Yak #3)", nil, false},
		{"nft --version failed", "", errors.New("exit status 1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := newFakeProxier(withCIDR)
			p.useNetlink(tc.out, tc.err)
			for _, fp := range p.set.Families {
				if got := fp.batch != nil; got != tc.netlink {
					t.Errorf("%s: netlink writer %v, want %v", fp.b.ip, got, tc.netlink)
				}
			}
		})
	}
}
