//go:build linux

package netlink

import "testing"

func TestCheckNFTVersion(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"mirrored release", "nftables v1.0.6 (Lester Gooch #5)\n", true},
		{"newer release", "nftables v1.0.9 (Old Doc Yak #3)\n", false},
		{"next minor", "nftables v1.1.0 (Commodore Bullmoose)\n", false},
		{"older release", "nftables v0.9.8 (E.D.S.)\n", false},
		{"unknown output", "nft: command not found\n", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckNFTVersion(tc.out)
			if got := err == nil; got != tc.ok {
				t.Errorf("CheckNFTVersion(%q) = %v, want ok %v", tc.out, err, tc.ok)
			}
		})
	}
}
