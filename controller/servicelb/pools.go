package servicelb

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Range is an inclusive range of addresses of one IP family.
type Range struct {
	First, Last netip.Addr
}

// Contains reports whether a lies in r.
func (r Range) Contains(a netip.Addr) bool {
	return a.Is4() == r.First.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Family returns the IP family of r's addresses.
func (r Range) Family() corev1.IPFamily { return familyOf(r.First) }

// String returns r as "first-last", or one address when r holds one.
func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

func (r Range) overlaps(o Range) bool {
	return r.Contains(o.First) || r.Contains(o.Last) || o.Contains(r.First)
}

// Pools are the addresses LoadBalancer Services get, in the order they are
// handed out: the lowest free address of the first range that has one.
type Pools []Range

// ParsePools parses a comma-separated list of CIDRs ("192.0.2.0/24",
// "2001:db8::/120"), ranges ("192.0.2.10-192.0.2.20") and single
// addresses, IPv4 and IPv6 mixed. An IPv4 CIDR of /30 or wider leaves out
// its network and broadcast addresses, which some clients and routers
// mishandle (MetalLB hands them out unless told to avoid them); /31 and /32
// CIDRs, all IPv6 CIDRs and all ranges are used whole. The empty string
// gives no pools. Errors name the offending item.
func ParsePools(s string) (Pools, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var pools Pools
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		r, err := parseItem(item)
		if err != nil {
			return nil, fmt.Errorf("load balancer IP pool %q: %w", item, err)
		}
		for _, prev := range pools {
			if r.overlaps(prev) {
				return nil, fmt.Errorf("load balancer IP pool %q: overlaps %s", item, prev)
			}
		}
		pools = append(pools, r)
	}
	return pools, nil
}

func parseItem(item string) (Range, error) {
	switch {
	case item == "":
		return Range{}, errors.New("empty item")
	case strings.Contains(item, "/"):
		return parseCIDR(item)
	case strings.Contains(item, "-"):
		return parseRange(item)
	}
	a, err := parseAddr(item)
	if err != nil {
		return Range{}, fmt.Errorf("want a CIDR (192.0.2.0/24), a range (192.0.2.10-192.0.2.20) or an address: %w", err)
	}
	return Range{First: a, Last: a}, nil
}

func parseCIDR(item string) (Range, error) {
	p, err := netip.ParsePrefix(item)
	if err != nil {
		return Range{}, err
	}
	if p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return Range{}, errors.New("want a plain IPv4 or IPv6 CIDR")
	}
	if p.Masked() != p {
		return Range{}, fmt.Errorf("host bits set; did you mean %s?", p.Masked())
	}
	r := Range{First: p.Addr(), Last: lastOf(p)}
	if p.Addr().Is4() && p.Bits() <= 30 {
		r.First, r.Last = r.First.Next(), r.Last.Prev()
	}
	return r, nil
}

// lastOf returns the highest address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func parseRange(item string) (Range, error) {
	lo, hi, _ := strings.Cut(item, "-")
	first, err := parseAddr(strings.TrimSpace(lo))
	if err != nil {
		return Range{}, err
	}
	last, err := parseAddr(strings.TrimSpace(hi))
	if err != nil {
		return Range{}, err
	}
	switch {
	case first.Is4() != last.Is4():
		return Range{}, errors.New("the two ends are of different IP families")
	case last.Less(first):
		return Range{}, errors.New("the first address is above the last")
	}
	return Range{First: first, Last: last}, nil
}

// parseAddr parses a plain IPv4 or IPv6 address: no zone, IPv4-mapped
// IPv6 addresses taken as IPv4.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%s: zones are not allowed", s)
	}
	return a.Unmap(), nil
}

// Contains reports whether a is in one of the pools.
func (p Pools) Contains(a netip.Addr) bool {
	for _, r := range p {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// Has reports whether some pool is of family.
func (p Pools) Has(family corev1.IPFamily) bool {
	for _, r := range p {
		if r.Family() == family {
			return true
		}
	}
	return false
}

// String lists the pools as ParsePools reads them back.
func (p Pools) String() string {
	parts := make([]string, 0, len(p))
	for _, r := range p {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ",")
}

func familyOf(a netip.Addr) corev1.IPFamily {
	if a.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}
