package apiserver

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseServiceCIDRs parses --service-cluster-ip-range: one CIDR, or two of
// different families for dual-stack, primary first.
func ParseServiceCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("%s is not a network address (want %s)", p, p.Masked())
		}
		out = append(out, p)
	}
	switch {
	case len(out) > 2:
		return nil, fmt.Errorf("at most two CIDRs (one per family) allowed, got %d", len(out))
	case len(out) == 2 && out[0].Addr().Is4() == out[1].Addr().Is4():
		return nil, fmt.Errorf("dual-stack needs one IPv4 and one IPv6 CIDR")
	}
	for _, p := range out {
		if p.Addr().BitLen()-p.Bits() < 2 {
			return nil, fmt.Errorf("%s is too small", p)
		}
	}
	return out, nil
}

// FirstServiceIP is the address of the kubernetes Service: the first host
// address of the range.
func FirstServiceIP(p netip.Prefix) netip.Addr {
	return p.Masked().Addr().Next()
}
