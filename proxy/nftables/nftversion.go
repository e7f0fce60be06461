//go:build linux

package nftables

import (
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/nftables/netlink"
)

// useNetlink gives each family a netlink writer if version, the output
// of `nft --version` (or the error running it), says the running nft
// writes what the writer does. If not, every sync goes through nft:
// slower, but the table is what nft makes of it.
func (p *Proxier) useNetlink(version string, err error) {
	if err == nil {
		err = netlink.CheckNFTVersion(version)
	}
	if err != nil {
		klog.InfoS("Netlink writer off; every sync goes through nft", "reason", err)
		return
	}
	for _, fp := range p.set.Families {
		fam := knftables.IPv4Family
		if fp.b.ip == "ip6" {
			fam = knftables.IPv6Family
		}
		fp.batch = netlink.NewWriter(fam, tableName)
	}
}
