package apiserver

import (
	"errors"
	"fmt"
	"net/netip"

	"portal.dev/portal/internal/cidrflag"
)

// ParseServiceCIDRs parses --service-cluster-ip-range by the rule every
// CIDR flag is read with (see cidrflag): one CIDR, or one per family for
// dual-stack, primary first. Errors name the flag.
func ParseServiceCIDRs(s string) ([]netip.Prefix, error) {
	out, err := cidrflag.Parse("--service-cluster-ip-range", s)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("--service-cluster-ip-range: a CIDR is required")
	}
	for _, p := range out {
		if p.Addr().BitLen()-p.Bits() < 2 {
			return nil, fmt.Errorf("--service-cluster-ip-range: %s is too small", p)
		}
	}
	return out, nil
}

// FirstServiceIP is the address of the kubernetes Service: the first host
// address of the range.
func FirstServiceIP(p netip.Prefix) netip.Addr {
	return p.Masked().Addr().Next()
}

// ParseExternalIPCIDRs parses --service-external-ip-cidrs: any number of
// CIDRs of either family, each by cidrflag's rule (the network address,
// no host bits). Errors name the flag.
func ParseExternalIPCIDRs(items []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range items {
		p, err := cidrflag.Parse("--service-external-ip-cidrs", item)
		if err != nil {
			return nil, err
		}
		if len(p) == 0 {
			return nil, errors.New("--service-external-ip-cidrs: empty item in the list")
		}
		out = append(out, p...)
	}
	return out, nil
}
