//go:build linux

package netlink

// This file encodes element operations: a run of them becomes a message
// per set, each element keyed and valued as nft would encode it.

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// maxElementsBytes keeps a message's element list under netlink's
// 64 KiB attribute limit.
const maxElementsBytes = 60000

// elemRef is one element of a run: ops[op], element i of it when the op
// is a bulk one.
type elemRef struct{ op, i int32 }

// elements writes a run of element operations of one verb, grouped by
// set, a message per set (more for big ones).
func (e *encoder) elements(run []op, first int32) error {
	var order []string
	bySet := map[string][]elemRef{}
	add := func(name string, ref elemRef) error {
		if _, ok := e.set(name); !ok {
			return e.notEncodable(run[ref.op], "set neither declared in this transaction nor known")
		}
		refs, ok := bySet[name]
		if !ok {
			order = append(order, name)
		}
		bySet[name] = append(refs, ref)
		return nil
	}
	for i, o := range run {
		var err error
		switch obj := o.obj.(type) {
		case *knftables.Element:
			name := obj.Set
			if obj.Map != "" {
				name = obj.Map
			}
			if !e.checkTable(obj.Family, obj.Table) || (obj.Set != "" && obj.Map != "") || obj.Comment != nil {
				return e.notEncodable(o, "element attributes")
			}
			err = add(name, elemRef{int32(i), -1})
		case *Slots:
			for j := range obj.Endpoints {
				if err = add(obj.Map, elemRef{int32(i), int32(j)}); err != nil {
					break
				}
			}
		case addrPairs:
			for j := range obj.addrs {
				if err = add(obj.set, elemRef{int32(i), int32(j)}); err != nil {
					break
				}
			}
		}
		if err != nil {
			return err
		}
	}
	typ, flags := uint16(unix.NFT_MSG_NEWSETELEM), uint16(unix.NLM_F_CREATE)
	if run[0].verb == opDelete {
		typ, flags = unix.NFT_MSG_DELSETELEM, 0
	}
	b := e.b
	el := elemEncoding{fam: e.w.fam}
	for _, name := range order {
		info, _ := e.set(name)
		if info.interval && run[0].verb == opAdd {
			nftOrder(bySet[name])
		}
		open := false
		for _, ref := range bySet[name] {
			o := run[ref.op]
			if !el.encode(info, o, int(ref.i), run[0].verb == opAdd) {
				return e.notEncodable(o, "element key or value")
			}
			if open && len(b.buf)-b.nest[len(b.nest)-1] > maxElementsBytes {
				b.close()
				b.end()
				open = false
			}
			if !open {
				b.msg(typ, flags, first+ref.op)
				b.str(unix.NFTA_SET_ELEM_LIST_TABLE, e.w.table)
				info.ref(b, unix.NFTA_SET_ELEM_LIST_SET, unix.NFTA_SET_ELEM_LIST_SET_ID)
				b.open(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
				open = true
			}
			b.open(unix.NFTA_LIST_ELEM)
			b.dataValue(unix.NFTA_SET_ELEM_KEY, el.key)
			if el.keyEnd != nil {
				b.dataValue(nftaSetElemKeyEnd, el.keyEnd)
			}
			switch {
			case el.hasVerdict:
				b.verdict(unix.NFTA_SET_ELEM_DATA, el.verdict)
			case el.data != nil:
				b.dataValue(unix.NFTA_SET_ELEM_DATA, el.data)
			}
			b.close()
		}
		if open {
			b.close()
			b.end()
		}
	}
	return nil
}

// nftOrder puts refs, the additions of one run to one set, in the order
// nft MirroredNFT sends them: it collapses consecutive "add element" commands
// on a set into the first, which keeps its element first and gets the
// others in reverse. `nft list` shows an interval set's elements in the
// order they were added, so this order is part of the ruleset.
func nftOrder(refs []elemRef) {
	for i := 0; i < len(refs); {
		j := i + 1
		for j < len(refs) && refs[j].op == refs[j-1].op+1 {
			j++
		}
		slices.Reverse(refs[i+1 : j])
		i = j
	}
}

// elemEncoding is one element's encoding, its buffers reused from one
// element to the next.
type elemEncoding struct {
	fam         nfFamily
	key, keyEnd []byte
	keyEndBuf   []byte
	data        []byte
	verdict     verdict
	hasVerdict  bool
	parts       []string
}

// encode encodes element i of o (a knftables element when i is -1) of
// the set info; withData says whether a map element carries its value.
func (el *elemEncoding) encode(info *setInfo, o op, i int, withData bool) bool {
	el.key, el.keyEnd, el.data, el.hasVerdict = el.key[:0], nil, nil, false
	switch obj := o.obj.(type) {
	case *Slots:
		// Key: the slot number (host order); value: address . port.
		if !info.isMap || len(info.key) != 1 || info.key[0] != fieldInteger || len(info.data) != 2 || info.data[0].len != el.fam.addrLen || info.data[1] != fieldService {
			return false
		}
		ap := obj.Endpoints[i]
		if ap.Addr().BitLen() != 8*el.fam.addrLen {
			return false
		}
		el.key = binary.NativeEndian.AppendUint32(el.key, obj.First+uint32(i))
		if withData {
			el.data = appendAddr(el.data[:0], ap.Addr())
			el.data = pad32(binary.BigEndian.AppendUint16(el.data, ap.Port()), 2)
		}
		return true
	case addrPairs:
		a := obj.addrs[i]
		if info.isMap || info.interval || len(info.key) != 2 || info.key[0].len != el.fam.addrLen || info.key[1] != info.key[0] || a.BitLen() != 8*el.fam.addrLen {
			return false
		}
		el.key = appendAddr(appendAddr(el.key, a), a)
		return true
	case *knftables.Element:
		var ok bool
		var keyEnd []byte
		el.key, keyEnd, el.parts, ok = encodeKey(info, obj.Key, el.key, el.keyEndBuf[:0], el.parts)
		if !ok {
			return false
		}
		if keyEnd != nil {
			el.keyEnd, el.keyEndBuf = keyEnd, keyEnd
		}
		if !info.isMap || !withData {
			return true
		}
		if info.data == nil {
			el.verdict, ok = parseVerdict(strings.Fields(strings.Join(obj.Value, " ")))
			el.hasVerdict = ok
			return ok
		}
		el.parts = splitFields(obj.Value, el.parts[:0])
		el.data, ok = encodeFields(info.data, el.parts, el.data[:0])
		return ok
	}
	return false
}

// encodeKey encodes an element key; for an interval set also the end of
// its range (a prefix in the last field). parts is scratch space.
func encodeKey(info *setInfo, words []string, key, keyEnd []byte, parts []string) ([]byte, []byte, []string, bool) {
	parts = splitFields(words, parts[:0])
	if len(parts) != len(info.key) {
		return nil, nil, parts, false
	}
	if !info.interval {
		k, ok := encodeFields(info.key, parts, key)
		return k, nil, parts, ok
	}
	if len(info.key) < 2 {
		return nil, nil, parts, false // non-concatenated intervals: not used
	}
	for i, f := range info.key {
		var ok bool
		if key, keyEnd, ok = appendFieldRange(f, parts[i], key, keyEnd); !ok {
			return nil, nil, parts, false
		}
	}
	return key, keyEnd, parts, true
}

// splitFields appends to parts the values of words, which knftables
// gives either one per field or joined by " . ".
func splitFields(words []string, parts []string) []string {
	for _, w := range words {
		for {
			p, rest, found := strings.Cut(w, " . ")
			parts = append(parts, strings.TrimSpace(p))
			if !found {
				break
			}
			w = rest
		}
	}
	return parts
}

// encodeFields appends a concatenation of values, each padded to 32 bits.
func encodeFields(fs []fieldType, parts []string, out []byte) ([]byte, bool) {
	if len(parts) != len(fs) {
		return nil, false
	}
	for i, f := range fs {
		var ok bool
		if out, ok = appendFieldValue(out, f, parts[i]); !ok {
			return nil, false
		}
		if len(fs) > 1 {
			out = pad32(out, f.len)
		}
	}
	return out, true
}

// pad32 pads the value of n bytes just appended to out to 32 bits.
func pad32(out []byte, n int) []byte {
	for ; n%4 != 0; n++ {
		out = append(out, 0)
	}
	return out
}

func appendFieldValue(out []byte, f fieldType, s string) ([]byte, bool) {
	switch f {
	case fieldIPv4, fieldIPv6:
		a, err := netip.ParseAddr(s)
		if err != nil || a.BitLen() != 8*f.len || a.Zone() != "" {
			return nil, false
		}
		return appendAddr(out, a), true
	case fieldProto:
		p, ok := protoNumber(s)
		return append(out, p), ok
	case fieldService:
		p, err := strconv.ParseUint(s, 10, 16)
		return binary.BigEndian.AppendUint16(out, uint16(p)), err == nil
	case fieldInteger:
		v, err := strconv.ParseUint(s, 10, 32)
		return binary.NativeEndian.AppendUint32(out, uint32(v)), err == nil
	}
	return nil, false
}

func appendAddr(out []byte, a netip.Addr) []byte {
	if a.Is4() {
		b := a.As4()
		return append(out, b[:]...)
	}
	b := a.As16()
	return append(out, b[:]...)
}

// appendFieldRange appends the first and last value of a field of an
// interval key, padded: an address prefix, or a single value.
func appendFieldRange(f fieldType, s string, start, end []byte) ([]byte, []byte, bool) {
	if (f == fieldIPv4 || f == fieldIPv6) && strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().BitLen() != 8*f.len || p != p.Masked() {
			return nil, nil, false
		}
		n := len(end)
		start = appendAddr(start, p.Addr())
		end = appendAddr(end, p.Addr())
		for i := p.Bits(); i < 8*f.len; i++ {
			end[n+i/8] |= 0x80 >> (i % 8)
		}
		return pad32(start, f.len), pad32(end, f.len), true
	}
	var ok bool
	n := len(start)
	if start, ok = appendFieldValue(start, f, s); !ok {
		return nil, nil, false
	}
	end = append(end, start[n:]...)
	return pad32(start, f.len), pad32(end, f.len), true
}
