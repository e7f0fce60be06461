// Package svcconfig describes the cluster-wide Service settings that
// defaulting, validation and allocation all need to agree on: the Service
// cluster IP ranges (which also fix the cluster's IP families) and the
// NodePort range.
//
// It is a leaf package of plain data and of the rules that defaulting and
// validation must apply alike (KeepsPreferDualStack): it holds no allocator
// state and must not import the packages that use it (apiserver/defaults,
// apiserver/validation), so that both of them can depend on it.
package svcconfig

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DefaultNodePortRange is upstream's default --service-node-port-range,
// 30000-32767; a zero PortRange stands for it.
var DefaultNodePortRange = PortRange{Base: 30000, Size: 2768}

// PortRange is a contiguous range of ports [Base, Base+Size).
type PortRange struct {
	Base int
	Size int
}

// OrDefault returns r, or DefaultNodePortRange when r is the zero value.
func (r PortRange) OrDefault() PortRange {
	if r.Size == 0 {
		return DefaultNodePortRange
	}
	return r
}

// Contains reports whether port lies in the range.
func (r PortRange) Contains(port int) bool {
	return port >= r.Base && port < r.Base+r.Size
}

// String formats the range as "first-last", the form upstream's flags and
// allocator messages use (e.g. "30000-32767").
func (r PortRange) String() string {
	if r.Size <= 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1)
}

// ServiceConfig is the cluster's Service configuration.
//
// The zero value describes a single-stack IPv4 cluster with no cluster IP
// range configured (so no cluster IP is in range) and the default NodePort
// range.
type ServiceConfig struct {
	// ClusterIPRanges are the Service cluster IP ranges, primary family
	// first; one range, or two of different families for dual-stack.
	ClusterIPRanges []netip.Prefix
	// NodePortRange is the NodePort range; the zero value means
	// DefaultNodePortRange.
	NodePortRange PortRange
}

// Families returns the cluster's IP families, primary first. A config with no
// ranges is treated as single-stack IPv4, the upstream default.
func (c ServiceConfig) Families() []corev1.IPFamily {
	if len(c.ClusterIPRanges) == 0 {
		return []corev1.IPFamily{corev1.IPv4Protocol}
	}
	out := make([]corev1.IPFamily, 0, len(c.ClusterIPRanges))
	for _, p := range c.ClusterIPRanges {
		out = append(out, FamilyOfAddr(p.Addr()))
	}
	return out
}

// PrimaryFamily returns the family of the first range (IPv4 when none).
func (c ServiceConfig) PrimaryFamily() corev1.IPFamily {
	return c.Families()[0]
}

// HasFamily reports whether the cluster has a range of family f.
func (c ServiceConfig) HasFamily(f corev1.IPFamily) bool {
	for _, have := range c.Families() {
		if have == f {
			return true
		}
	}
	return false
}

// DualStack reports whether the cluster has ranges of both families.
func (c ServiceConfig) DualStack() bool {
	return len(c.Families()) == 2
}

// RangeFor returns the configured range of family f, if any.
func (c ServiceConfig) RangeFor(f corev1.IPFamily) (netip.Prefix, bool) {
	for _, p := range c.ClusterIPRanges {
		if FamilyOfAddr(p.Addr()) == f {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// FamilyOfAddr returns the IP family of a, treating IPv4-mapped IPv6
// addresses as IPv4 as the Kubernetes net utilities do.
func FamilyOfAddr(a netip.Addr) corev1.IPFamily {
	if a.Unmap().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// OtherFamily returns the family that is not f.
func OtherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// ParsePortRange parses "30000-32767" (both ends included) or a single port.
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		hi = lo
	}
	base, err1 := strconv.Atoi(strings.TrimSpace(lo))
	last, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || base < 1 || last > 65535 || last < base {
		return PortRange{}, fmt.Errorf("%q is not a port range like 30000-32767", s)
	}
	return PortRange{Base: base, Size: last - base + 1}, nil
}
