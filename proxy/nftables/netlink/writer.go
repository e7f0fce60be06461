//go:build linux

// Package netlink writes an nftables transaction to the kernel as one
// netlink batch, encoded the way the nft release it mirrors encodes it
// (MirroredNFT), so that the kernel holds what nft would have put there
// and `nft list` prints the same text. The nftables proxy mode records
// a sync's operations in a Recording and hands it to a Writer; what the
// encoder does not know, or a batch the kernel never saw, is reported as
// ErrNotEncodable or ErrNotSent, and the caller then replays the
// Recording through nft, whole. It knows only the statements, sets and
// maps the proxy mode writes, and touches one table of one family.
package netlink

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// A full sync is about fourteen nft commands per Service; nft spends
// more time parsing and evaluating them than the kernel spends applying
// them, and the kernel looks a set up by name for every "add element"
// command. So syncs go to the kernel as one netlink batch encoded here,
// with the elements of a set in a few messages. Partial syncs, small, go
// the same way: nft lists the whole table before it writes a single
// element, where the batch goes straight to the kernel. The batch holds
// exactly what nft would have written (see rule.go), so the two paths
// write the same ruleset and either can follow the other.

type opVerb uint8

const (
	opAdd opVerb = iota
	opFlush
	opDelete
)

// op is one recorded operation. obj is a knftables.Object, or, for the
// bulk of a full sync's elements, kept as values rather than text (their
// text would be most of the garbage a full sync makes), a *Slots (its
// endpoint map elements) or addrPairs (address pair set elements).
type op struct {
	verb opVerb
	obj  any
}

// Slots are the elements of consecutive slots of an endpoint map: slot
// First+i maps to Endpoints[i] ("addr . port"). Chain, the chain whose
// slots they are, only names them in errors.
type Slots struct {
	Map       string
	Chain     string
	First     uint32
	Endpoints []netip.AddrPort
}

// Element returns the map element of slot First+i.
func (s *Slots) Element(i int) *knftables.Element {
	var buf [64]byte
	v := s.Endpoints[i].Addr().AppendTo(buf[:0])
	v = append(v, " . "...)
	v = strconv.AppendUint(v, uint64(s.Endpoints[i].Port()), 10)
	// Key and value share one array: a big full sync makes hundreds of
	// thousands of these.
	kv := []string{strconv.FormatUint(uint64(s.First)+uint64(i), 10), string(v)}
	return &knftables.Element{Map: s.Map, Key: kv[:1:1], Value: kv[1:]}
}

// addrPairs are elements "a . a" of set.
type addrPairs struct {
	set   string
	addrs []netip.Addr
}

// AddrPairElement returns the element "a . a" of set.
func AddrPairElement(set string, a netip.Addr) *knftables.Element {
	s := a.String()
	return &knftables.Element{Set: set, Key: []string{s, s}}
}

// Recording keeps a transaction's operations, in order. Its zero value
// is empty and ready to use.
type Recording struct {
	ops []op
	n   int // operations, counting each element of a bulk op
}

// NewRecording returns an empty Recording with room for capacity
// operations, bulk ones counting as one.
func NewRecording(capacity int) *Recording {
	return &Recording{ops: make([]op, 0, capacity)}
}

// Add records adding obj.
func (r *Recording) Add(obj knftables.Object) { r.ops = append(r.ops, op{opAdd, obj}); r.n++ }

// Flush records flushing obj.
func (r *Recording) Flush(obj knftables.Object) { r.ops = append(r.ops, op{opFlush, obj}); r.n++ }

// Delete records deleting obj.
func (r *Recording) Delete(obj knftables.Object) { r.ops = append(r.ops, op{opDelete, obj}); r.n++ }

// AddSlots records adding the elements of s.
func (r *Recording) AddSlots(s *Slots) {
	r.ops = append(r.ops, op{opAdd, s})
	r.n += len(s.Endpoints)
}

// AddAddrPairs records adding an element "a . a" to set for each a in
// addrs.
func (r *Recording) AddAddrPairs(set string, addrs []netip.Addr) {
	r.ops = append(r.ops, op{opAdd, addrPairs{set, addrs}})
	r.n += len(addrs)
}

// NumOperations is the number of operations recorded, each element of a
// bulk operation counting as one.
func (r *Recording) NumOperations() int { return r.n }

// Len is the number of operations recorded, a bulk one counting as one:
// what NewRecording's capacity counts.
func (r *Recording) Len() int { return len(r.ops) }

// Replay writes the recording into tx.
func (r *Recording) Replay(tx *knftables.Transaction) {
	for _, o := range r.ops {
		switch obj := o.obj.(type) {
		case *Slots:
			for i := range obj.Endpoints {
				tx.Add(obj.Element(i))
			}
		case addrPairs:
			for _, a := range obj.addrs {
				tx.Add(AddrPairElement(obj.set, a))
			}
		case knftables.Object:
			switch o.verb {
			case opAdd:
				tx.Add(obj)
			case opFlush:
				tx.Flush(obj)
			case opDelete:
				tx.Delete(obj)
			}
		}
	}
}

// ErrNotEncodable means the Recording holds something the netlink
// encoder does not know; nft has to write it.
var ErrNotEncodable = errors.New("not encodable as netlink")

// Writer writes Recordings to one table of one family through netlink,
// in the kernel of the current network namespace. It is not safe for
// concurrent use.
type Writer struct {
	fam   nfFamily
	table string
	// send is sock.send.
	send func(*nlBatch) error
	sock nlSocket
	// lastSize is the size of the last big batch (lastOps operations),
	// to size the next one as big.
	lastSize, lastOps int
	// known are the sets and maps the table has, as far as the writes
	// this writer saw tell: those a batch adds to (or a rule uses) without
	// declaring them. A set missing here makes the batch not encodable.
	known map[string]*setInfo
}

// NewWriter returns a Writer for table of family.
func NewWriter(family knftables.Family, table string) *Writer {
	fam := familyIPv4
	if family == knftables.IPv6Family {
		fam = familyIPv6
	}
	w := &Writer{fam: fam, table: table}
	w.send = w.sock.send
	return w
}

// Encode encodes rec as Write would and returns the batch's size in
// bytes, without sending it: ErrNotEncodable says Write would leave rec
// to nft.
func (w *Writer) Encode(rec *Recording) (int, error) {
	b, err := w.encode(rec)
	if err != nil {
		return 0, err
	}
	return len(b.buf), nil
}

// Write applies rec in one transaction. ErrNotEncodable or ErrNotSent
// (wrapped) mean it did nothing and rec must go through nft; after any
// other error the table is uncertain until the next full sync.
func (w *Writer) Write(_ context.Context, rec *Recording) error {
	if len(rec.ops) == 0 {
		return nil
	}
	b, err := w.encode(rec)
	if err != nil {
		return err
	}
	if n := rec.NumOperations(); n >= w.lastOps/2 {
		w.lastSize, w.lastOps = len(b.buf), n
	}
	if err := w.send(b); err != nil {
		if !errors.Is(err, ErrNotSent) {
			// Refused, or no answer: what the table holds now is not
			// certain, so nothing is assumed until the next full sync.
			w.known = nil
		}
		return err
	}
	w.Wrote(rec)
	return nil
}

// Wrote says nft applied rec instead: the writer learns the sets and
// maps rec declares and deletes. Names are stable (a set's name says
// what it holds), but a declaration the encoder does not know makes the
// set unknown.
func (w *Writer) Wrote(rec *Recording) {
	for _, o := range rec.ops {
		var name string
		var d setDecl
		switch obj := o.obj.(type) {
		case *knftables.Table:
			if o.verb == opDelete {
				w.known = nil
			}
			continue
		case *knftables.Set:
			name, d = obj.Name, setDeclOf(obj)
			if !w.checkTable(obj.Family, obj.Table) {
				continue
			}
		case *knftables.Map:
			name, d = obj.Name, mapDeclOf(obj)
			if !w.checkTable(obj.Family, obj.Table) {
				continue
			}
		default:
			continue
		}
		switch o.verb {
		case opAdd:
			info, _, _, err := w.describeSet(name, d)
			if err != nil || d.other {
				delete(w.known, name)
				continue
			}
			if w.known == nil {
				w.known = map[string]*setInfo{}
			}
			w.known[name] = info
		case opDelete:
			delete(w.known, name)
		}
	}
}

// fieldType is one field of a set's key or data.
type fieldType struct {
	typ  uint32 // nft datatype
	len  int    // bytes, unpadded
	host bool   // host byte order (integer); else network order
}

var (
	fieldIPv4    = fieldType{typ: 7, len: 4}
	fieldIPv6    = fieldType{typ: 8, len: 16}
	fieldProto   = fieldType{typ: 12, len: 1}
	fieldService = fieldType{typ: 13, len: 2}
	fieldInteger = fieldType{typ: 4, len: 4, host: true}
)

const verdictType = 0xffffff00

// setInfo is what encoding needs to know of a set or map the batch
// declares.
type setInfo struct {
	name     string
	id       uint32
	key      []fieldType
	data     []fieldType // nil for a set or a verdict map
	isMap    bool
	interval bool
}

// ref adds a reference to s to b's open message: its name and, for a set
// the same batch adds, the batch's id for it.
func (s *setInfo) ref(b *nlBatch, nameAttr, idAttr uint16) {
	b.str(nameAttr, s.name)
	if s.id != 0 {
		b.u32(idAttr, s.id)
	}
}

type encoder struct {
	w *Writer
	b *nlBatch
	// sets are the sets and maps the batch declares, by name.
	sets map[string]*setInfo
	// deleted are the sets the batch deleted and did not declare again;
	// tableDeleted says the batch deleted the table, so none of w.known.
	deleted      map[string]struct{}
	tableDeleted bool
	nextID       uint32
	rc           ruleCompiler
}

// set returns a set or map the batch declared, or one the table has;
// the latter have id 0 (the kernel finds them by name).
func (e *encoder) set(name string) (*setInfo, bool) {
	if s, ok := e.sets[name]; ok {
		return s, true
	}
	if _, gone := e.deleted[name]; gone || e.tableDeleted {
		return nil, false
	}
	s, ok := e.w.known[name]
	return s, ok
}

// encode turns rec into a batch, or fails with ErrNotEncodable.
func (w *Writer) encode(rec *Recording) (*nlBatch, error) {
	size := 80*rec.NumOperations() + 4096 // about what the proxier's operations take
	if w.lastSize > 0 && rec.NumOperations() >= w.lastOps/2 {
		size = w.lastSize + w.lastSize/8
	}
	e := &encoder{w: w, b: newNLBatch(w.fam.proto, w.table, size), sets: map[string]*setInfo{}, deleted: map[string]struct{}{}}
	e.b.describe = func(i int32) string { return describeOp(rec.ops[i]) }
	e.rc = ruleCompiler{b: e.b, fam: w.fam, sets: e.set}
	ops := rec.ops
	for i := 0; i < len(ops); {
		o := ops[i]
		if isElementOp(o) {
			// A run of element operations of one verb goes out grouped by
			// set: element additions (or deletions) of different sets do
			// not depend on each other, and the kernel then looks each
			// set up once per message, not once per element.
			j := i
			for j < len(ops) && ops[j].verb == o.verb && isElementOp(ops[j]) {
				j++
			}
			if err := e.elements(ops[i:j], int32(i)); err != nil {
				return nil, err
			}
			i = j
			continue
		}
		if err := e.op(o, int32(i)); err != nil {
			return nil, err
		}
		i++
	}
	return e.b, nil
}

func isElementOp(o op) bool {
	switch o.obj.(type) {
	case *knftables.Element:
		return o.verb != opFlush
	case *Slots, addrPairs:
		return true
	}
	return false
}

func (e *encoder) notEncodable(o op, why string) error {
	return fmt.Errorf("%w: %s: %s", ErrNotEncodable, describeOp(o), why)
}

func (e *encoder) checkTable(family knftables.Family, table string) bool {
	return e.w.checkTable(family, table)
}

func (w *Writer) checkTable(family knftables.Family, table string) bool {
	return (family == "" || string(family) == w.fam.ip) && (table == "" || table == w.table)
}

// op encodes one operation on a table, chain, rule, set or map.
func (e *encoder) op(o op, idx int32) error {
	switch obj := o.obj.(type) {
	case *knftables.Table:
		return e.table(o, obj, idx)
	case *knftables.Chain:
		return e.chain(o, obj, idx)
	case *knftables.Rule:
		return e.rule(o, obj, idx)
	case *knftables.Set:
		return e.setOp(o, idx, obj.Family, obj.Table, obj.Name, setDeclOf(obj))
	case *knftables.Map:
		return e.setOp(o, idx, obj.Family, obj.Table, obj.Name, mapDeclOf(obj))
	}
	return e.notEncodable(o, "object type")
}

func (e *encoder) table(o op, t *knftables.Table, idx int32) error {
	b := e.b
	if !e.checkTable(t.Family, t.Name) || t.Handle != nil || len(t.Flags) > 0 {
		return e.notEncodable(o, "table attributes")
	}
	switch o.verb {
	case opAdd:
		b.msg(unix.NFT_MSG_NEWTABLE, 0, idx)
		b.str(unix.NFTA_TABLE_NAME, e.w.table)
		b.u32(unix.NFTA_TABLE_FLAGS, 0)
		if t.Comment != nil {
			ud, ok := udataComment(0, *t.Comment) // NFTNL_UDATA_TABLE_COMMENT
			if !ok {
				return e.notEncodable(o, "comment too long")
			}
			b.attr(nftaTableUserdata, ud)
		}
	case opDelete:
		b.msg(unix.NFT_MSG_DELTABLE, 0, idx)
		b.str(unix.NFTA_TABLE_NAME, e.w.table)
		e.tableDeleted = true
		clear(e.sets)
	default:
		return e.notEncodable(o, "verb")
	}
	b.end()
	return nil
}

func (e *encoder) chain(o op, c *knftables.Chain, idx int32) error {
	b := e.b
	if !e.checkTable(c.Family, c.Table) || c.Handle != nil || c.Policy != nil || c.Device != nil || c.Comment != nil {
		return e.notEncodable(o, "chain attributes")
	}
	switch o.verb {
	case opAdd:
		b.msg(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE, idx)
		b.str(unix.NFTA_CHAIN_TABLE, e.w.table)
		b.str(unix.NFTA_CHAIN_NAME, c.Name)
		if c.Type != nil || c.Hook != nil || c.Priority != nil {
			if c.Type == nil || c.Hook == nil || c.Priority == nil {
				return e.notEncodable(o, "incomplete base chain")
			}
			hook, ok := hookNumbers[*c.Hook]
			prio, err := strconv.ParseInt(string(*c.Priority), 10, 32)
			if !ok || err != nil {
				return e.notEncodable(o, "hook or priority")
			}
			b.str(unix.NFTA_CHAIN_TYPE, string(*c.Type))
			b.open(unix.NFTA_CHAIN_HOOK)
			b.u32(unix.NFTA_HOOK_HOOKNUM, hook)
			b.u32(unix.NFTA_HOOK_PRIORITY, uint32(int32(prio)))
			b.close()
		}
	case opFlush:
		b.msg(unix.NFT_MSG_DELRULE, 0, idx)
		b.str(unix.NFTA_RULE_TABLE, e.w.table)
		b.str(unix.NFTA_RULE_CHAIN, c.Name)
	case opDelete:
		b.msg(unix.NFT_MSG_DELCHAIN, 0, idx)
		b.str(unix.NFTA_CHAIN_TABLE, e.w.table)
		b.str(unix.NFTA_CHAIN_NAME, c.Name)
	}
	b.end()
	return nil
}

func (e *encoder) rule(o op, r *knftables.Rule, idx int32) error {
	b := e.b
	if o.verb != opAdd || !e.checkTable(r.Family, r.Table) || r.Handle != nil || r.Index != nil || r.Comment != nil {
		return e.notEncodable(o, "rule attributes")
	}
	b.msg(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, idx)
	b.str(unix.NFTA_RULE_TABLE, e.w.table)
	b.str(unix.NFTA_RULE_CHAIN, r.Chain)
	if !e.rc.compile(r.Rule) {
		return e.notEncodable(o, "rule") // the batch is dropped
	}
	b.end()
	return nil
}

// setDecl is the part of a knftables Set or Map the encoder reads.
type setDecl struct {
	isMap   bool
	typ     string
	typeOf  string
	flags   []knftables.SetFlag
	timeout *time.Duration
	comment *string
	other   bool // anything else set
}

func setDeclOf(obj *knftables.Set) setDecl {
	return setDecl{typ: obj.Type, typeOf: obj.TypeOf, flags: obj.Flags, timeout: obj.Timeout, comment: obj.Comment, other: obj.GCInterval != nil || obj.Size != nil || obj.Policy != nil || obj.Handle != nil || obj.AutoMerge != nil}
}

func mapDeclOf(obj *knftables.Map) setDecl {
	return setDecl{isMap: true, typ: obj.Type, typeOf: obj.TypeOf, flags: obj.Flags, timeout: obj.Timeout, comment: obj.Comment, other: obj.GCInterval != nil || obj.Size != nil || obj.Policy != nil || obj.Handle != nil}
}

func (e *encoder) setOp(o op, idx int32, family knftables.Family, table, name string, d setDecl) error {
	b := e.b
	if !e.checkTable(family, table) {
		return e.notEncodable(o, "table")
	}
	switch o.verb {
	case opFlush:
		b.msg(unix.NFT_MSG_DELSETELEM, 0, idx)
		b.str(unix.NFTA_SET_ELEM_LIST_TABLE, e.w.table)
		b.str(unix.NFTA_SET_ELEM_LIST_SET, name)
		b.end()
		return nil
	case opDelete:
		b.msg(unix.NFT_MSG_DELSET, 0, idx)
		b.str(unix.NFTA_SET_TABLE, e.w.table)
		b.str(unix.NFTA_SET_NAME, name)
		b.end()
		delete(e.sets, name)
		e.deleted[name] = struct{}{}
		return nil
	}
	if d.other {
		return e.notEncodable(o, "set attributes")
	}
	info, flags, udata, err := e.w.describeSet(name, d)
	if err != nil {
		return e.notEncodable(o, err.Error())
	}
	e.nextID++
	info.id = e.nextID
	e.sets[name] = info
	delete(e.deleted, name)
	b.msg(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, idx)
	b.str(unix.NFTA_SET_TABLE, e.w.table)
	b.str(unix.NFTA_SET_NAME, name)
	b.u32(unix.NFTA_SET_FLAGS, flags)
	keyType, keyLen := concatType(info.key)
	b.u32(unix.NFTA_SET_KEY_TYPE, keyType)
	b.u32(unix.NFTA_SET_KEY_LEN, keyLen)
	if info.isMap {
		if info.data == nil {
			b.u32(unix.NFTA_SET_DATA_TYPE, verdictType)
			b.u32(unix.NFTA_SET_DATA_LEN, 0)
		} else {
			t, l := concatType(info.data)
			b.u32(unix.NFTA_SET_DATA_TYPE, t)
			b.u32(unix.NFTA_SET_DATA_LEN, l)
		}
	}
	b.u32(unix.NFTA_SET_ID, info.id)
	if d.timeout != nil {
		b.u64(unix.NFTA_SET_TIMEOUT, uint64(d.timeout.Milliseconds()))
	}
	if flags&nftSetConcat != 0 {
		b.open(unix.NFTA_SET_DESC)
		b.open(nftaSetDescConcat)
		for _, f := range info.key {
			b.open(unix.NFTA_LIST_ELEM)
			b.u32(nftaSetFieldLen, uint32(f.len))
			b.close()
		}
		b.close()
		b.close()
	}
	b.attr(unix.NFTA_SET_USERDATA, udata)
	b.end()
	return nil
}

// Set userdata as nft MirroredNFT writes it (libnftnl's NFTNL_UDATA_SET_*
// TLVs), without the comment; `nft list` reads key byte order and
// typeof expressions from it.
var (
	udataAddrKey      = mustHex("000402000000")
	udataConcatSet    = mustHex("000400000000030800040d0000000100")
	udataConcatVmap   = mustHex("000400000000010400000000030800040d0000000100060400000000")
	udataEndpointsMap = func() map[string][]byte {
		m := map[string][]byte{}
		for _, ip := range []string{"ip", "ip6"} {
			fam := "0c00040c00000001040c00000001"
			if ip == "ip6" {
				fam = "0c00040d00000001040900000001"
			}
			for proto, p := range map[string]string{"tcp": "08", "udp": "06", "sctp": "0a"} {
				m[ip+" "+proto] = mustHex("000401000000010400000000031a0004170000000112000401000000010401000000020400000000043400040d000000012c001400040700000001" +
					fam + "14000407000000010c0004" + p + "000000010402000000060400000000")
			}
		}
		return m
	}()
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// udataComment returns the comment TLV of type typ.
func udataComment(typ byte, c string) ([]byte, bool) {
	if len(c)+1 > 255 {
		return nil, false
	}
	out := append([]byte{typ, byte(len(c) + 1)}, c...)
	return append(out, 0), true
}

// describeSet works out the kernel attributes of a declaration the
// proxier makes: the set types of static.go, affinity sets and the
// endpoint maps.
func (w *Writer) describeSet(name string, d setDecl) (*setInfo, uint32, []byte, error) {
	info := &setInfo{name: name, isMap: d.isMap}
	var flags uint32
	if d.isMap {
		flags |= unix.NFT_SET_MAP
	}
	for _, f := range d.flags {
		switch f {
		case knftables.IntervalFlag:
			flags |= unix.NFT_SET_INTERVAL
			info.interval = true
		case knftables.TimeoutFlag:
			flags |= unix.NFT_SET_TIMEOUT
		case knftables.DynamicFlag:
			flags |= unix.NFT_SET_EVAL
		default:
			return nil, 0, nil, fmt.Errorf("flag %s", f)
		}
	}
	var udata []byte
	switch {
	case d.typeOf != "":
		// "numgen random mod 1 : ip daddr . tcp dport", the endpoint maps.
		k, v, _ := strings.Cut(d.typeOf, " : ")
		f := strings.Fields(v)
		if !d.isMap || k != "numgen random mod 1" || len(f) != 5 || f[0] != w.fam.ip || f[1] != "daddr" || f[2] != "." || f[4] != "dport" || flags != unix.NFT_SET_MAP {
			return nil, 0, nil, fmt.Errorf("typeof %q", d.typeOf)
		}
		ud, ok := udataEndpointsMap[w.fam.ip+" "+f[3]]
		if !ok {
			return nil, 0, nil, fmt.Errorf("typeof %q", d.typeOf)
		}
		info.key = []fieldType{fieldInteger}
		info.data = []fieldType{w.addrField(), fieldService}
		udata = append([]byte(nil), ud...)
	default:
		k, v, hasData := strings.Cut(d.typ, " : ")
		if hasData != d.isMap || (hasData && v != "verdict") {
			return nil, 0, nil, fmt.Errorf("type %q", d.typ)
		}
		for _, t := range strings.Split(k, " . ") {
			f, ok := map[string]fieldType{"ipv4_addr": fieldIPv4, "ipv6_addr": fieldIPv6, "inet_proto": fieldProto, "inet_service": fieldService}[t]
			if !ok {
				return nil, 0, nil, fmt.Errorf("type %q", d.typ)
			}
			info.key = append(info.key, f)
		}
		concat := len(info.key) > 1
		switch {
		case d.isMap && concat && flags == unix.NFT_SET_MAP:
			udata = append(udata, udataConcatVmap...)
		case !d.isMap && concat && (flags == 0 || flags == unix.NFT_SET_INTERVAL):
			udata = append(udata, udataConcatSet...)
			if info.interval {
				flags |= nftSetConcat
			}
		case !d.isMap && !concat && (info.key[0] == fieldIPv4 || info.key[0] == fieldIPv6) && flags&unix.NFT_SET_INTERVAL == 0:
			udata = append(udata, udataAddrKey...)
		default:
			return nil, 0, nil, fmt.Errorf("type %q with flags %v", d.typ, d.flags)
		}
	}
	if d.comment != nil {
		c, ok := udataComment(7, *d.comment) // NFTNL_UDATA_SET_COMMENT
		if !ok {
			return nil, 0, nil, errors.New("comment too long")
		}
		udata = append(udata, c...)
	}
	return info, flags, udata, nil
}

func (w *Writer) addrField() fieldType {
	if w.fam.addrLen == 16 {
		return fieldIPv6
	}
	return fieldIPv4
}

// concatType is nft's type id and length of a key or data made of fs.
func concatType(fs []fieldType) (typ, length uint32) {
	for _, f := range fs {
		typ = typ<<6 | f.typ
		length += uint32((f.len + 3) &^ 3)
	}
	if len(fs) == 1 {
		length = uint32(fs[0].len)
	}
	return typ, length
}

var hookNumbers = map[knftables.BaseChainHook]uint32{
	knftables.PreroutingHook:  unix.NF_INET_PRE_ROUTING,
	knftables.InputHook:       unix.NF_INET_LOCAL_IN,
	knftables.ForwardHook:     unix.NF_INET_FORWARD,
	knftables.OutputHook:      unix.NF_INET_LOCAL_OUT,
	knftables.PostroutingHook: unix.NF_INET_POST_ROUTING,
}

func describeOp(o op) string {
	verb := [...]string{"add", "flush", "delete"}[o.verb]
	switch obj := o.obj.(type) {
	case *Slots:
		return fmt.Sprintf("%s elements of map %s (chain %s's %d endpoints)", verb, obj.Map, obj.Chain, len(obj.Endpoints))
	case addrPairs:
		return fmt.Sprintf("%s %d elements of set %s", verb, len(obj.addrs), obj.set)
	case *knftables.Table:
		return verb + " table"
	case *knftables.Chain:
		return verb + " chain " + obj.Name
	case *knftables.Rule:
		return verb + " rule " + obj.Chain + " " + obj.Rule
	case *knftables.Set:
		return verb + " set " + obj.Name
	case *knftables.Map:
		return verb + " map " + obj.Name
	case *knftables.Element:
		name := obj.Set + obj.Map
		s := verb + " element " + name + " { " + strings.Join(obj.Key, " . ")
		if len(obj.Value) > 0 {
			s += " : " + strings.Join(obj.Value, " ")
		}
		return s + " }"
	}
	return fmt.Sprintf("%s %T", verb, o.obj)
}
