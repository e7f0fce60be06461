package nodeipam

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// maxSubnetBits bounds how many node CIDRs one cluster CIDR may be cut
// into (2^16), as kube-controller-manager does, so the bitmap stays small.
const maxSubnetBits = 16

// ErrFull means every node CIDR of a cluster CIDR is taken.
var ErrFull = errors.New("no node CIDR left in the cluster CIDR")

// CIDRSet hands out the node-sized subnets of one cluster CIDR. It is an
// in-memory structure; the controller rebuilds it from the Nodes at start.
type CIDRSet struct {
	cluster  netip.Prefix
	maskSize int
	max      int
	used     big.Int
	count    int
	next     int
}

// NewCIDRSet cuts cluster into subnets of maskSize bits.
func NewCIDRSet(cluster netip.Prefix, maskSize int) (*CIDRSet, error) {
	cluster = cluster.Masked()
	bits := cluster.Addr().BitLen()
	switch {
	case maskSize < cluster.Bits():
		return nil, fmt.Errorf("node mask size /%d is larger than the cluster CIDR %s", maskSize, cluster)
	case maskSize > bits:
		return nil, fmt.Errorf("node mask size /%d is too long for %s", maskSize, cluster)
	case maskSize-cluster.Bits() > maxSubnetBits:
		return nil, fmt.Errorf("cluster CIDR %s cut into /%d gives more than 2^%d node CIDRs", cluster, maskSize, maxSubnetBits)
	}
	return &CIDRSet{cluster: cluster, maskSize: maskSize, max: 1 << (maskSize - cluster.Bits())}, nil
}

// Allocate takes the next free subnet, searching on from the last one
// handed out so a released subnet is not reused at once.
func (s *CIDRSet) Allocate() (netip.Prefix, error) {
	if s.count >= s.max {
		return netip.Prefix{}, fmt.Errorf("%s: %w", s.cluster, ErrFull)
	}
	for i := 0; i < s.max; i++ {
		n := (s.next + i) % s.max
		if s.used.Bit(n) == 0 {
			s.used.SetBit(&s.used, n, 1)
			s.count++
			s.next = (n + 1) % s.max
			return s.subnet(n), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%s: %w", s.cluster, ErrFull)
}

// Occupy marks p as taken, e.g. a node's existing spec.podCIDR. A prefix
// that is not one of the set's subnets is an error.
func (s *CIDRSet) Occupy(p netip.Prefix) error {
	n, err := s.index(p)
	if err != nil {
		return err
	}
	if s.used.Bit(n) == 0 {
		s.used.SetBit(&s.used, n, 1)
		s.count++
	}
	return nil
}

// Release frees p.
func (s *CIDRSet) Release(p netip.Prefix) error {
	n, err := s.index(p)
	if err != nil {
		return err
	}
	if s.used.Bit(n) == 1 {
		s.used.SetBit(&s.used, n, 0)
		s.count--
	}
	return nil
}

// Contains says whether p is inside the set's cluster CIDR.
func (s *CIDRSet) Contains(p netip.Prefix) bool {
	return p.Addr().BitLen() == s.cluster.Addr().BitLen() && s.cluster.Overlaps(p) && p.Bits() >= s.cluster.Bits()
}

// Used is how many subnets are taken.
func (s *CIDRSet) Used() int { return s.count }

func (s *CIDRSet) index(p netip.Prefix) (int, error) {
	if p.Bits() != s.maskSize || !s.Contains(p) || p.Masked() != p {
		return 0, fmt.Errorf("%s is not a /%d node CIDR of %s", p, s.maskSize, s.cluster)
	}
	off := new(big.Int).Sub(addrInt(p.Addr()), addrInt(s.cluster.Addr()))
	off.Rsh(off, uint(p.Addr().BitLen()-s.maskSize))
	return int(off.Int64()), nil
}

func (s *CIDRSet) subnet(n int) netip.Prefix {
	off := new(big.Int).Lsh(big.NewInt(int64(n)), uint(s.cluster.Addr().BitLen()-s.maskSize))
	a := intAddr(new(big.Int).Add(addrInt(s.cluster.Addr()), off), s.cluster.Addr().Is4())
	return netip.PrefixFrom(a, s.maskSize)
}

func addrInt(a netip.Addr) *big.Int {
	b := a.AsSlice()
	return new(big.Int).SetBytes(b)
}

func intAddr(i *big.Int, v4 bool) netip.Addr {
	if v4 {
		var b [4]byte
		i.FillBytes(b[:])
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	i.FillBytes(b[:])
	return netip.AddrFrom16(b)
}
