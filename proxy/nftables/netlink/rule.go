//go:build linux

package netlink

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// This file compiles the rules the proxier writes, nft text, into
// nf_tables expressions, the way nft MirroredNFT does (same expressions, same
// registers), so the kernel holds what nft would have put there and
// `nft list` prints the same text. It knows only the statements the
// proxier uses; anything else makes compile fail and the sync falls back
// to nft.

// nfFamily is what the encoding needs to know about a table's family.
type nfFamily struct {
	proto   byte   // NFPROTO_IPV4 or NFPROTO_IPV6
	ip      string // "ip" or "ip6"
	addrLen int    // 4 or 16
}

var (
	familyIPv4 = nfFamily{proto: unix.NFPROTO_IPV4, ip: "ip", addrLen: 4}
	familyIPv6 = nfFamily{proto: unix.NFPROTO_IPV6, ip: "ip6", addrLen: 16}
)

// Register numbers as nft picks them: a value starting at 32-bit word k
// of the register file uses the 128-bit register name when k is a
// multiple of 4, the 32-bit one otherwise.
func reg(k int) uint32 {
	if k%4 == 0 {
		return unix.NFT_REG_1 + uint32(k/4)
	}
	return unix.NFT_REG32_00 + uint32(k)
}

// selector is one value a rule loads: a header field or meta key.
type selector struct {
	meta   bool
	base   uint32 // payload base
	offset uint32
	len    int // bytes
}

// ruleCompiler writes one rule's expressions into a batch.
type ruleCompiler struct {
	b    *nlBatch
	fam  nfFamily
	sets func(name string) (*setInfo, bool)
	w    []string
	i    int
}

// compile writes the NFTA_RULE_EXPRESSIONS of rule; false means a
// statement it does not know.
func (c *ruleCompiler) compile(rule string) bool {
	c.w, c.i = appendFields(c.w[:0], rule), 0
	c.b.open(unix.NFTA_RULE_EXPRESSIONS)
	for c.i < len(c.w) {
		if !c.statement() {
			return false
		}
	}
	c.b.close()
	return true
}

func (c *ruleCompiler) at(words ...string) bool {
	if c.i+len(words) > len(c.w) {
		return false
	}
	for j, w := range words {
		if w != "*" && c.w[c.i+j] != w {
			return false
		}
	}
	return true
}

func (c *ruleCompiler) word(j int) string {
	if c.i+j < len(c.w) {
		return c.w[c.i+j]
	}
	return ""
}

func (c *ruleCompiler) statement() bool {
	switch {
	case c.at("ct", "state", "new"):
		c.ctFlag(unix.NFT_CT_STATE, 8) // NF_CT_STATE_BIT(IP_CT_NEW)
		c.i += 3
	case c.at("ct", "status", "dnat"):
		c.ctFlag(unix.NFT_CT_STATUS, 0x20) // IPS_DST_NAT
		c.i += 3
	case c.at("fib", "daddr", "type", "local"), c.at("fib", "saddr", "type", "local"):
		flag := uint32(unix.NFTA_FIB_F_DADDR)
		if c.word(1) == "saddr" {
			flag = unix.NFTA_FIB_F_SADDR
		}
		c.expr("fib", func(b *nlBatch) {
			b.u32(unix.NFTA_FIB_FLAGS, flag)
			b.u32(unix.NFTA_FIB_RESULT, unix.NFT_FIB_RESULT_ADDRTYPE)
			b.u32(unix.NFTA_FIB_DREG, unix.NFT_REG_1)
		})
		c.cmp(unix.NFT_CMP_EQ, hostU32(unix.RTN_LOCAL))
		c.i += 4
	case c.at("meta", "mark", "set", "meta", "mark", "*", "*"):
		return c.markSet()
	case c.at("meta", "mark", "&", "*", "==", "*"):
		m, ok1 := parseMark(c.word(3))
		v, ok2 := parseMark(c.word(5))
		if !ok1 || !ok2 {
			return false
		}
		c.metaLoad(unix.NFT_META_MARK, 0)
		c.bitwise(hostU32(m), hostU32(0), true)
		c.cmp(unix.NFT_CMP_EQ, hostU32(v))
		c.i += 6
	case c.at("masquerade", "fully-random"):
		c.expr("masq", func(b *nlBatch) { b.u32(unix.NFTA_MASQ_FLAGS, unix.NF_NAT_RANGE_PROTO_RANDOM_FULLY) })
		c.i += 2
	case c.at("reject", "with", "tcp", "reset"):
		c.reject(unix.NFT_REJECT_TCP_RST, 0)
		c.i += 4
	case c.at("reject") && c.i == len(c.w)-1:
		code := byte(3) // ICMP_PORT_UNREACH
		if c.fam.proto == unix.NFPROTO_IPV6 {
			code = 4 // ICMPV6_PORT_UNREACH
		}
		c.reject(unix.NFT_REJECT_ICMP_UNREACH, code)
		c.i++
	case c.at("numgen", "random", "mod", "*"):
		return c.numgenMatch()
	case c.at("update", "*", "{", c.fam.ip, "saddr", "}"):
		set, ok := c.setRef(c.word(1))
		if !ok {
			return false
		}
		c.payload(c.addr("saddr"), 0)
		c.expr("dynset", func(b *nlBatch) {
			b.u32(unix.NFTA_DYNSET_SREG_KEY, unix.NFT_REG_1)
			b.u32(unix.NFTA_DYNSET_OP, unix.NFT_DYNSET_OP_UPDATE)
			set.ref(b, unix.NFTA_DYNSET_SET_NAME, unix.NFTA_DYNSET_SET_ID)
		})
		c.i += 6
	case c.at("dnat"):
		return c.dnat()
	case c.word(0) == "counter":
		// An anonymous counter starting at zero, as nft sends it.
		c.expr("counter", func(b *nlBatch) {
			b.u64(unix.NFTA_COUNTER_BYTES, 0)
			b.u64(unix.NFTA_COUNTER_PACKETS, 0)
		})
		c.i++
	case c.word(0) == "jump" || c.word(0) == "goto":
		if c.i != len(c.w)-2 {
			return false
		}
		v, _ := parseVerdict(c.w[c.i:])
		c.immediateVerdict(v)
		c.i += 2
	case c.word(0) == "return" || c.word(0) == "drop" || c.word(0) == "accept":
		if c.i != len(c.w)-1 {
			return false
		}
		v, _ := parseVerdict(c.w[c.i:])
		c.immediateVerdict(v)
		c.i++
	default:
		return c.match()
	}
	return true
}

// markSet compiles "meta mark set meta mark (| or ^) MARK".
func (c *ruleCompiler) markSet() bool {
	m, ok := parseMark(c.word(6))
	if !ok {
		return false
	}
	var mask, xor uint32
	switch c.word(5) {
	case "|":
		mask, xor = ^m, m
	case "^":
		mask, xor = 0xffffffff, m
	default:
		return false
	}
	c.metaLoad(unix.NFT_META_MARK, 0)
	c.bitwise(hostU32(mask), hostU32(xor), true)
	c.expr("meta", func(b *nlBatch) {
		b.u32(unix.NFTA_META_KEY, unix.NFT_META_MARK)
		b.u32(unix.NFTA_META_SREG, unix.NFT_REG_1)
	})
	c.i += 7
	return true
}

// match compiles "selector [. selector]... (vmap @map | @set | [!=] value)".
func (c *ruleCompiler) match() bool {
	var sels []selector
	for {
		s, n, ok := c.selector()
		if !ok {
			return false
		}
		sels = append(sels, s)
		c.i += n
		if c.word(0) != "." {
			break
		}
		c.i++
	}
	switch {
	case c.word(0) == "vmap" || strings.HasPrefix(c.word(0), "@"):
		isVmap := c.word(0) == "vmap"
		if isVmap {
			c.i++
		}
		set, ok := c.setRef(c.word(0))
		if !ok {
			return false
		}
		c.i++
		k := 0
		for _, s := range sels {
			c.load(s, k)
			if s.meta && set.interval {
				// nft stores interval keys big-endian.
				r := reg(k)
				c.expr("byteorder", func(b *nlBatch) {
					b.u32(unix.NFTA_BYTEORDER_SREG, r)
					b.u32(unix.NFTA_BYTEORDER_DREG, r)
					b.u32(unix.NFTA_BYTEORDER_OP, unix.NFT_BYTEORDER_HTON)
					b.u32(unix.NFTA_BYTEORDER_LEN, 1)
					b.u32(unix.NFTA_BYTEORDER_SIZE, 2)
				})
			}
			k += (s.len + 3) / 4
		}
		c.expr("lookup", func(b *nlBatch) {
			b.u32(unix.NFTA_LOOKUP_SREG, unix.NFT_REG_1)
			if isVmap {
				b.u32(unix.NFTA_LOOKUP_DREG, unix.NFT_REG_VERDICT)
			}
			set.ref(b, unix.NFTA_LOOKUP_SET, unix.NFTA_LOOKUP_SET_ID)
		})
		return true
	case len(sels) != 1:
		return false
	}
	s := sels[0]
	op := uint32(unix.NFT_CMP_EQ)
	if c.word(0) == "!=" {
		op = unix.NFT_CMP_NEQ
		c.i++
	}
	v := c.word(0)
	c.i++
	if s.meta {
		p, ok := protoNumber(v)
		if !ok {
			return false
		}
		c.load(s, 0)
		c.cmp(op, []byte{p})
		return true
	}
	if s.len != c.fam.addrLen {
		return false
	}
	if a, err := netip.ParseAddr(v); err == nil && a.BitLen() == 8*c.fam.addrLen {
		c.load(s, 0)
		c.cmp(op, a.AsSlice())
		return true
	}
	p, err := netip.ParsePrefix(v)
	if err != nil || p.Addr().BitLen() != 8*c.fam.addrLen || p.Bits() == 0 || p != p.Masked() {
		return false
	}
	addr := p.Addr().AsSlice()
	if p.Bits()%8 == 0 {
		n := p.Bits() / 8
		c.load(selector{base: s.base, offset: s.offset, len: n}, 0)
		c.cmp(op, addr[:n])
		return true
	}
	// Not on a byte boundary: nft loads the whole address and masks it.
	mask := make([]byte, c.fam.addrLen)
	for j := 0; j < p.Bits(); j++ {
		mask[j/8] |= 0x80 >> (j % 8)
	}
	c.load(s, 0)
	c.bitwise(mask, make([]byte, c.fam.addrLen), false)
	c.cmp(op, addr)
	return true
}

// selector parses a selector at the current word: its length in words.
func (c *ruleCompiler) selector() (selector, int, bool) {
	switch {
	case c.at(c.fam.ip, "daddr"), c.at(c.fam.ip, "saddr"):
		return c.addr(c.word(1)), 2, true
	case c.at("meta", "l4proto"):
		return selector{meta: true, len: 1}, 2, true
	case c.at("th", "dport"):
		return selector{base: unix.NFT_PAYLOAD_TRANSPORT_HEADER, offset: 2, len: 2}, 2, true
	}
	return selector{}, 0, false
}

func (c *ruleCompiler) addr(which string) selector {
	s := selector{base: unix.NFT_PAYLOAD_NETWORK_HEADER, len: c.fam.addrLen}
	switch {
	case c.fam.addrLen == 4 && which == "saddr":
		s.offset = 12
	case c.fam.addrLen == 4:
		s.offset = 16
	case which == "saddr":
		s.offset = 8
	default:
		s.offset = 24
	}
	return s
}

func (c *ruleCompiler) load(s selector, k int) {
	if s.meta {
		c.metaLoad(unix.NFT_META_L4PROTO, k)
		return
	}
	c.payload(s, k)
}

func (c *ruleCompiler) payload(s selector, k int) {
	c.expr("payload", func(b *nlBatch) {
		b.u32(unix.NFTA_PAYLOAD_DREG, reg(k))
		b.u32(unix.NFTA_PAYLOAD_BASE, s.base)
		b.u32(unix.NFTA_PAYLOAD_OFFSET, s.offset)
		b.u32(unix.NFTA_PAYLOAD_LEN, uint32(s.len))
	})
}

func (c *ruleCompiler) metaLoad(key uint32, k int) {
	c.expr("meta", func(b *nlBatch) {
		b.u32(unix.NFTA_META_KEY, key)
		b.u32(unix.NFTA_META_DREG, reg(k))
	})
}

// numgenMatch compiles "numgen random mod N V" and "numgen random mod N < V".
func (c *ruleCompiler) numgenMatch() bool {
	mod, err := strconv.ParseUint(c.word(3), 10, 32)
	if err != nil {
		return false
	}
	lt := c.word(4) == "<"
	vw := c.word(4)
	if lt {
		vw = c.word(5)
	}
	v, err := strconv.ParseUint(vw, 10, 32)
	if err != nil {
		return false
	}
	c.numgen(uint32(mod), 0)
	if lt {
		c.expr("byteorder", func(b *nlBatch) {
			b.u32(unix.NFTA_BYTEORDER_SREG, unix.NFT_REG_1)
			b.u32(unix.NFTA_BYTEORDER_DREG, unix.NFT_REG_1)
			b.u32(unix.NFTA_BYTEORDER_OP, unix.NFT_BYTEORDER_HTON)
			b.u32(unix.NFTA_BYTEORDER_LEN, 4)
			b.u32(unix.NFTA_BYTEORDER_SIZE, 4)
		})
		c.cmp(unix.NFT_CMP_LT, binary.BigEndian.AppendUint32(nil, uint32(v)))
		c.i += 6
		return true
	}
	c.cmp(unix.NFT_CMP_EQ, hostU32(uint32(v)))
	c.i += 5
	return true
}

func (c *ruleCompiler) numgen(mod, offset uint32) {
	c.expr("numgen", func(b *nlBatch) {
		b.u32(unix.NFTA_NG_DREG, unix.NFT_REG_1)
		b.u32(unix.NFTA_NG_MODULUS, mod)
		b.u32(unix.NFTA_NG_TYPE, unix.NFT_NG_RANDOM)
		b.u32(unix.NFTA_NG_OFFSET, offset)
	})
}

// dnat compiles "dnat to ADDR:PORT" and
// "dnat ip to numgen random mod N offset O map @M".
func (c *ruleCompiler) dnat() bool {
	if c.at("dnat", c.fam.ip, "to", "numgen", "random", "mod", "*", "offset", "*", "map", "*") && c.i+11 == len(c.w) {
		mod, err1 := strconv.ParseUint(c.word(6), 10, 32)
		off, err2 := strconv.ParseUint(c.word(8), 10, 32)
		set, ok := c.setRef(c.word(10))
		if err1 != nil || err2 != nil || !ok {
			return false
		}
		c.numgen(uint32(mod), uint32(off))
		c.expr("lookup", func(b *nlBatch) {
			b.u32(unix.NFTA_LOOKUP_SREG, unix.NFT_REG_1)
			b.u32(unix.NFTA_LOOKUP_DREG, unix.NFT_REG_1)
			set.ref(b, unix.NFTA_LOOKUP_SET, unix.NFTA_LOOKUP_SET_ID)
		})
		c.expr("nat", func(b *nlBatch) {
			b.u32(unix.NFTA_NAT_TYPE, unix.NFT_NAT_DNAT)
			b.u32(unix.NFTA_NAT_FAMILY, uint32(c.fam.proto))
			b.u32(unix.NFTA_NAT_REG_ADDR_MIN, unix.NFT_REG_1)
			b.u32(unix.NFTA_NAT_REG_PROTO_MIN, reg(c.fam.addrLen/4))
		})
		c.i += 11
		return true
	}
	if !c.at("dnat", "to", "*") || c.i+3 != len(c.w) {
		return false
	}
	ap, err := netip.ParseAddrPort(c.word(2))
	if err != nil || ap.Addr().BitLen() != 8*c.fam.addrLen || ap.Addr().Zone() != "" {
		return false
	}
	c.expr("immediate", func(b *nlBatch) {
		b.u32(unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_1)
		b.dataValue(unix.NFTA_IMMEDIATE_DATA, ap.Addr().AsSlice())
	})
	c.expr("immediate", func(b *nlBatch) {
		b.u32(unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_2)
		b.dataValue(unix.NFTA_IMMEDIATE_DATA, binary.BigEndian.AppendUint16(nil, ap.Port()))
	})
	c.expr("nat", func(b *nlBatch) {
		b.u32(unix.NFTA_NAT_TYPE, unix.NFT_NAT_DNAT)
		b.u32(unix.NFTA_NAT_FAMILY, uint32(c.fam.proto))
		b.u32(unix.NFTA_NAT_REG_ADDR_MIN, unix.NFT_REG_1)
		b.u32(unix.NFTA_NAT_REG_PROTO_MIN, unix.NFT_REG_2)
		b.u32(unix.NFTA_NAT_FLAGS, unix.NF_NAT_RANGE_PROTO_SPECIFIED)
	})
	c.i += 3
	return true
}

func (c *ruleCompiler) setRef(w string) (*setInfo, bool) {
	name, ok := strings.CutPrefix(w, "@")
	if !ok {
		return nil, false
	}
	return c.sets(name)
}

func (c *ruleCompiler) ctFlag(key, bit uint32) {
	c.expr("ct", func(b *nlBatch) {
		b.u32(unix.NFTA_CT_KEY, key)
		b.u32(unix.NFTA_CT_DREG, unix.NFT_REG_1)
	})
	c.bitwise(hostU32(bit), hostU32(0), false)
	c.cmp(unix.NFT_CMP_NEQ, hostU32(0))
}

// bitwise writes reg1 = (reg1 & mask) ^ xor; withOp adds the explicit
// boolean op attribute, as nft does for meta mark but not elsewhere.
func (c *ruleCompiler) bitwise(mask, xor []byte, withOp bool) {
	c.expr("bitwise", func(b *nlBatch) {
		b.u32(unix.NFTA_BITWISE_SREG, unix.NFT_REG_1)
		b.u32(unix.NFTA_BITWISE_DREG, unix.NFT_REG_1)
		if withOp {
			b.u32(nftaBitwiseOp, 0) // NFT_BITWISE_BOOL
		}
		b.u32(unix.NFTA_BITWISE_LEN, uint32(len(mask)))
		b.dataValue(unix.NFTA_BITWISE_MASK, mask)
		b.dataValue(unix.NFTA_BITWISE_XOR, xor)
	})
}

func (c *ruleCompiler) cmp(op uint32, v []byte) {
	c.expr("cmp", func(b *nlBatch) {
		b.u32(unix.NFTA_CMP_SREG, unix.NFT_REG_1)
		b.u32(unix.NFTA_CMP_OP, op)
		b.dataValue(unix.NFTA_CMP_DATA, v)
	})
}

func (c *ruleCompiler) reject(typ uint32, code byte) {
	c.expr("reject", func(b *nlBatch) {
		b.u32(unix.NFTA_REJECT_TYPE, typ)
		b.attr(unix.NFTA_REJECT_ICMP_CODE, []byte{code})
	})
}

func (c *ruleCompiler) immediateVerdict(v verdict) {
	c.expr("immediate", func(b *nlBatch) {
		b.u32(unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_VERDICT)
		b.verdict(unix.NFTA_IMMEDIATE_DATA, v)
	})
}

func (c *ruleCompiler) expr(name string, data func(b *nlBatch)) {
	b := c.b
	b.open(unix.NFTA_LIST_ELEM)
	b.str(unix.NFTA_EXPR_NAME, name)
	b.open(unix.NFTA_EXPR_DATA)
	data(b)
	b.close()
	b.close()
}

// appendFields appends the space-separated words of s to w (the
// proxier's rules have single spaces, but any run of spaces works).
func appendFields(w []string, s string) []string {
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return w
		}
		word, rest, _ := strings.Cut(s, " ")
		w = append(w, word)
		s = rest
	}
}

func hostU32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func parseMark(s string) (uint32, bool) {
	v, err := strconv.ParseUint(s, 0, 32)
	return uint32(v), err == nil
}

func protoNumber(s string) (byte, bool) {
	switch s {
	case "tcp":
		return unix.IPPROTO_TCP, true
	case "udp":
		return unix.IPPROTO_UDP, true
	case "sctp":
		return unix.IPPROTO_SCTP, true
	}
	return 0, false
}
