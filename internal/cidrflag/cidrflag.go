// Package cidrflag reads the flags that name IP ranges (--cluster-cidr,
// --pod-cidr, --service-cluster-ip-range) by one rule, so that a range
// given to several components means the same range to each of them.
//
// The rule: comma-separated CIDRs, at most one per IP family, each written
// as the network address of its prefix. A CIDR with host bits set
// (10.244.1.0/16) is refused, not masked: whether the user meant
// 10.244.0.0/16 or 10.244.1.0/24 is a guess, and a guess that differs
// between the component that hands out pod ranges and the one that
// masquerades traffic from outside them breaks traffic quietly. The error
// names the flag and the masked prefix, so the fix is one edit.
//
// The package only parses; it knows nothing of the components.
package cidrflag

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Parse reads the value of the flag called name (as "--cluster-cidr"):
// comma-separated CIDRs, at most one IPv4 and one IPv6, in the order given.
// A blank value is no ranges. Errors begin with the flag's name and say
// what to write instead.
func Parse(name, value string) ([]netip.Prefix, error) {
	out, err := parse(value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func parse(value string) ([]netip.Prefix, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for item := range strings.SplitSeq(value, ",") {
		p, err := parseOne(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		for _, prev := range out {
			if prev.Addr().Is4() == p.Addr().Is4() {
				return nil, fmt.Errorf("at most one range per IP family: %s and %s are both %s", prev, p, family(p))
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func parseOne(item string) (netip.Prefix, error) {
	if item == "" {
		return netip.Prefix{}, errors.New("empty item in the list")
	}
	p, err := netip.ParsePrefix(item)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (want one like 10.244.0.0/16 or fd00:10:244::/56)", item)
	}
	if p.Addr().Is4In6() {
		// Neither family's range, and the kernel's rules for either
		// would never match it.
		return netip.Prefix{}, fmt.Errorf("%s is an IPv4-mapped IPv6 CIDR; write the IPv4 CIDR", p)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%s has host bits set (did you mean %s?)", p, p.Masked())
	}
	return p, nil
}

func family(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// Value is a [github.com/spf13/pflag.Value] that reads a flag by Parse's
// rule into a slice of prefixes, so a bad range fails when the flags are
// parsed. Setting it replaces the slice.
type Value struct {
	p *[]netip.Prefix
}

// NewValue returns a Value that stores into p; p's current contents are
// the flag's default.
func NewValue(p *[]netip.Prefix) *Value { return &Value{p: p} }

// String returns the ranges as Set reads them back.
func (v *Value) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, p := range *v.p {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Set parses s by Parse's rule. Its errors do not name the flag, as the
// flag parser names it.
func (v *Value) Set(s string) error {
	out, err := parse(s)
	if err != nil {
		return err
	}
	*v.p = out
	return nil
}

// Type names the value's type in --help.
func (*Value) Type() string { return "cidrs" }
