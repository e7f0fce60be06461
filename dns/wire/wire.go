// Package wire reads and patches DNS messages by hand on the server's hot
// path: the header, the one question and the EDNS OPT record of a plain
// query, without allocating, and the few bytes of a cached response that
// differ between two queries for the same name (ID, RD and CD flags, the
// question name's case). Anything unusual is left to the caller's full
// parser; this package never builds answers.
package wire

import "encoding/binary"

const (
	headerLen = 12
	// MaxName is the longest name on the wire (RFC 1035 3.1).
	MaxName = 255
	// MinUDPSize is the UDP payload every client accepts (RFC 1035).
	MinUDPSize = 512
	// MaxUDPSize is the largest UDP response this server sends, whatever
	// the client advertises (the DNS flag day 2020 value).
	MaxUDPSize = 1232
	// KeyLen is the most bytes a cache key takes.
	KeyLen = MaxName + 7

	typeOPT = 41
	flagDO  = 0x8000
)

// Query is what the fast path reads from a query.
type Query struct {
	ID uint16
	// NameEnd is the offset just past the question name: the name is
	// pkt[12:NameEnd] and the response carries it at the same place.
	NameEnd int
	QType   uint16
	QClass  uint16
	EDNS    bool   // an OPT record was present
	UDPSize uint16 // the OPT record's payload size
	DO      bool   // DNSSEC OK
	Version uint8  // EDNS version
}

// MaxResponse is the size a UDP response to q must fit in.
func (q *Query) MaxResponse() int {
	if !q.EDNS {
		return MinUDPSize
	}
	return int(min(max(q.UDPSize, MinUDPSize), MaxUDPSize))
}

// Parse reads a plain query: QR clear, opcode QUERY, one question, no
// answer or authority records, at most one additional record that is an
// OPT at the root, and nothing after it. It appends the cache key (the
// lower-cased name, type, class, EDNS presence and DO bit, and the response
// size) to key and returns it; ok is false for anything else.
func Parse(pkt []byte, q *Query, key []byte) (_ []byte, ok bool) {
	if len(pkt) < headerLen+5 {
		return key, false
	}
	flags := binary.BigEndian.Uint16(pkt[2:])
	if flags&0x8000 != 0 || (flags>>11)&0xF != 0 || flags&0x0200 != 0 {
		return key, false // a response, an opcode other than QUERY, or TC set
	}
	if binary.BigEndian.Uint16(pkt[4:]) != 1 || binary.BigEndian.Uint16(pkt[6:]) != 0 ||
		binary.BigEndian.Uint16(pkt[8:]) != 0 {
		return key, false
	}
	arcount := binary.BigEndian.Uint16(pkt[10:])
	if arcount > 1 {
		return key, false
	}
	q.ID = binary.BigEndian.Uint16(pkt)
	off := headerLen
	for {
		if off >= len(pkt) {
			return key, false
		}
		l := int(pkt[off])
		if l == 0 {
			off++
			break
		}
		if l > 63 || off+1+l > len(pkt) || off+1+l-headerLen > MaxName-1 {
			return key, false // compression pointers, long labels, long names
		}
		key = append(key, byte(l))
		for _, c := range pkt[off+1 : off+1+l] {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			key = append(key, c)
		}
		off += 1 + l
	}
	key = append(key, 0)
	q.NameEnd = off
	if off+4 > len(pkt) {
		return key, false
	}
	q.QType = binary.BigEndian.Uint16(pkt[off:])
	q.QClass = binary.BigEndian.Uint16(pkt[off+2:])
	off += 4
	q.EDNS, q.DO, q.UDPSize, q.Version = false, false, 0, 0
	if arcount == 1 {
		// OPT: root name, type, class = UDP size, TTL = extended rcode,
		// version and flags, rdlength, options (ignored: no cookies, no
		// client subnet, and answers that do not depend on them).
		if off+11 > len(pkt) || pkt[off] != 0 || binary.BigEndian.Uint16(pkt[off+1:]) != typeOPT {
			return key, false
		}
		q.EDNS = true
		q.UDPSize = binary.BigEndian.Uint16(pkt[off+3:])
		q.Version = pkt[off+6]
		q.DO = binary.BigEndian.Uint16(pkt[off+7:])&flagDO != 0
		rdlen := int(binary.BigEndian.Uint16(pkt[off+9:]))
		off += 11
		if off+rdlen != len(pkt) || q.Version != 0 || pkt[off-6] != 0 {
			return key, false // BADVERS and extended rcodes take the slow path
		}
		if !validOptions(pkt[off:]) {
			return key, false
		}
		off += rdlen
	}
	if off != len(pkt) {
		return key, false
	}
	var ednsFlags byte
	if q.EDNS {
		ednsFlags = 1
		if q.DO {
			ednsFlags |= 2
		}
	}
	size := q.MaxResponse()
	key = append(key, byte(q.QType>>8), byte(q.QType), byte(q.QClass>>8), byte(q.QClass), ednsFlags,
		byte(size>>8), byte(size))
	return key, true
}

func validOptions(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		l := int(binary.BigEndian.Uint16(b[2:]))
		if 4+l > len(b) {
			return false
		}
		b = b[4+l:]
	}
	return true
}

// Patch makes resp, a cached response to another query with the same key,
// the response to pkt, whose Query q is: it takes the query's ID, RD and CD
// bits and question name (same bytes but for case). resp's question must
// start at offset 12, as in every response a server packs.
func Patch(resp, pkt []byte, q *Query) {
	resp[0], resp[1] = pkt[0], pkt[1]
	resp[2] = resp[2]&^0x01 | pkt[2]&0x01
	resp[3] = resp[3]&^0x10 | pkt[3]&0x10
	copy(resp[headerLen:q.NameEnd], pkt[headerLen:q.NameEnd])
}

// SameQuestionName reports whether resp carries the question name of pkt
// (case-insensitively) at the same offsets, so that Patch may be used.
func SameQuestionName(resp, pkt []byte, q *Query) bool {
	if len(resp) < q.NameEnd {
		return false
	}
	for i := headerLen; i < q.NameEnd; i++ {
		a, b := resp[i], pkt[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// FormErr writes into out the FORMERR reply to a message whose header is
// readable and that is not itself a response, and returns it; nil means
// the packet is to be dropped.
func FormErr(pkt, out []byte) []byte {
	if len(pkt) < headerLen || pkt[2]&0x80 != 0 || len(out) < headerLen {
		return nil
	}
	out = out[:headerLen]
	clear(out)
	out[0], out[1] = pkt[0], pkt[1]
	out[2] = 0x80 | pkt[2]&0x78 | pkt[2]&0x01 // QR, the opcode, RD
	out[3] = 1                                // FORMERR
	return out
}

// Rcode reads the (4-bit) rcode of a packed response.
func Rcode(resp []byte) int {
	if len(resp) < headerLen {
		return -1
	}
	return int(resp[3] & 0x0F)
}
