package allocator

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"

	"portal.dev/portal/apiserver/svcconfig"
)

// maxRange caps how many addresses of an IPv6 range are used: the bitmap
// of 2^20 addresses costs 128 KiB, and no cluster needs more services.
const maxRange = 1 << 20

// ipRange maps the allocatable addresses of a prefix to offsets.
type ipRange struct {
	prefix netip.Prefix
	base   netip.Addr // first allocatable address (offset 0)
	size   int
}

func newIPRange(p netip.Prefix) ipRange {
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	size := maxRange
	if hostBits < 21 {
		size = 1<<hostBits - 1 // without the network address
		if p.Addr().Is4() {
			size-- // and without IPv4 broadcast
		}
	}
	return ipRange{prefix: p, base: p.Addr().Next(), size: max(size, 0)}
}

// offset returns the offset of a, or false when a is outside the range.
func (r ipRange) offset(a netip.Addr) (int, bool) {
	a = a.Unmap()
	if !r.prefix.Contains(a) || a.Is4() != r.base.Is4() {
		return 0, false
	}
	ab, bb := a.As16(), r.base.As16()
	if [8]byte(ab[:8]) != [8]byte(bb[:8]) {
		return 0, false
	}
	lo, base := binary.BigEndian.Uint64(ab[8:]), binary.BigEndian.Uint64(bb[8:])
	if lo < base || lo-base >= uint64(r.size) {
		return 0, false
	}
	return int(lo - base), true
}

// addr returns the address at offset i.
func (r ipRange) addr(i int) netip.Addr {
	b := r.base.As16()
	binary.BigEndian.PutUint64(b[8:], binary.BigEndian.Uint64(b[8:])+uint64(i))
	a := netip.AddrFrom16(b)
	if r.base.Is4() {
		return a.Unmap()
	}
	return a
}

// checkIP returns nil when a Service may ask for ip: an allocatable
// address of the cluster's range of its family. Otherwise it returns an
// *IPRangeError (also when the cluster has no range of that family).
func (a *Allocator) checkIP(ip netip.Addr) error {
	ip = ip.Unmap()
	prefix, ok := a.cfg.RangeFor(svcconfig.FamilyOfAddr(ip))
	if ok && allocatable(prefix, ip) {
		return nil
	}
	valid := ""
	if ok {
		valid = prefix.String()
	}
	return &IPRangeError{IP: ip, ValidRange: valid}
}

// allocatable reports whether ip is an address of p that a Service may
// hold: any but the network address and, for IPv4, the broadcast address.
// Upstream's allocators never hand those out and refuse them when asked
// (for IPv6 the first address is the subnet-router anycast address; the
// last is an ordinary one), so that no Service holds an address some
// networks treat specially.
func allocatable(p netip.Prefix, ip netip.Addr) bool {
	p = p.Masked()
	if !p.Contains(ip) || ip == p.Addr() {
		return false
	}
	return !ip.Is4() || ip != lastAddr(p)
}

// lastAddr returns the last address of p: its host bits all set.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// checkPort returns nil when port lies in the NodePort range and a
// *PortRangeError otherwise.
func (a *Allocator) checkPort(port int) error {
	r := a.cfg.NodePortRange.OrDefault()
	if r.Contains(port) {
		return nil
	}
	return &PortRangeError{ValidPorts: r.String()}
}

// Key names one reservation in the Store: "ip/10.96.0.10" or "port/30080".
type Key string

func ipKey(a netip.Addr) Key { return Key("ip/" + a.Unmap().String()) }
func portKey(p int) Key      { return Key("port/" + strconv.Itoa(p)) }

// parseKey returns what a key reserves.
func parseKey(k Key) (ip netip.Addr, port int, err error) {
	s := string(k)
	switch {
	case len(s) > 3 && s[:3] == "ip/":
		ip, err = netip.ParseAddr(s[3:])
		return ip, 0, err
	case len(s) > 5 && s[:5] == "port/":
		port, err = strconv.Atoi(s[5:])
		return netip.Addr{}, port, err
	}
	return netip.Addr{}, 0, fmt.Errorf("unknown reservation key %q", k)
}
