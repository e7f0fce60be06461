//go:build linux

package netlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Netlink attribute numbers this file and its siblings use that
// golang.org/x/sys/unix does not define.
const (
	nlaNested   = 0x8000
	nlaTypeMask = 0x3fff // NLA_TYPE_MASK: the type without the nested and byte-order flags

	nftaSetElemKeyEnd = 10 // NFTA_SET_ELEM_KEY_END
	nftaSetDescConcat = 2  // NFTA_SET_DESC_CONCAT
	nftaSetFieldLen   = 1  // NFTA_SET_FIELD_LEN
	nftaBitwiseOp     = 6  // NFTA_BITWISE_OP
	nftaTableUserdata = 6  // NFTA_TABLE_USERDATA

	nftSetConcat = 0x80 // NFT_SET_CONCAT
	nfDrop       = 0    // NF_DROP
	nfAccept     = 1    // NF_ACCEPT
)

// nlBatch is one nf_tables transaction encoded as netlink messages: a
// batch-begin message, the operations, a batch-end message. The kernel
// applies all of it or none.
type nlBatch struct {
	buf    []byte
	family byte
	table  string
	seq    uint32
	// nest holds the offsets of the attributes being nested.
	nest []int
	// msgStart is the offset of the message being written.
	msgStart int
	// what[i] is the operation message seq i+1 encodes, -1 for none;
	// describe names it in errors.
	what     []int32
	describe func(op int32) string
}

func newNLBatch(family byte, table string, sizeHint int) *nlBatch {
	b := &nlBatch{buf: make([]byte, 0, sizeHint), family: family, table: table}
	b.control(unix.NFNL_MSG_BATCH_BEGIN)
	return b
}

// control writes a batch-begin or batch-end message.
func (b *nlBatch) control(typ uint16) {
	b.begin(typ, unix.NLM_F_REQUEST, unix.AF_UNSPEC, -1)
	// res_id of a batch message names the subsystem.
	binary.BigEndian.PutUint16(b.buf[b.msgStart+18:], unix.NFNL_SUBSYS_NFTABLES)
	b.end()
}

// begin starts a message: a netlink header and nfgenmsg.
func (b *nlBatch) begin(typ, flags uint16, family byte, what int32) {
	b.seq++
	b.msgStart = len(b.buf)
	var h [20]byte
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], b.seq)
	h[16] = family
	h[17] = unix.NFNETLINK_V0
	b.buf = append(b.buf, h[:]...)
	b.what = append(b.what, what)
}

// msg starts an nf_tables message about b's table.
func (b *nlBatch) msg(typ uint16, flags uint16, what int32) {
	b.begin(unix.NFNL_SUBSYS_NFTABLES<<8|typ, unix.NLM_F_REQUEST|flags, b.family, what)
}

func (b *nlBatch) end() {
	binary.NativeEndian.PutUint32(b.buf[b.msgStart:], uint32(len(b.buf)-b.msgStart))
}

func (b *nlBatch) attr(typ uint16, v []byte) {
	l := 4 + len(v)
	b.buf = binary.NativeEndian.AppendUint16(b.buf, uint16(l))
	b.buf = binary.NativeEndian.AppendUint16(b.buf, typ)
	b.buf = append(b.buf, v...)
	b.pad()
}

func (b *nlBatch) pad() {
	for len(b.buf)%4 != 0 {
		b.buf = append(b.buf, 0)
	}
}

func (b *nlBatch) str(typ uint16, s string) {
	l := 4 + len(s) + 1
	b.buf = binary.NativeEndian.AppendUint16(b.buf, uint16(l))
	b.buf = binary.NativeEndian.AppendUint16(b.buf, typ)
	b.buf = append(b.buf, s...)
	b.buf = append(b.buf, 0)
	b.pad()
}

func (b *nlBatch) u32(typ uint16, v uint32) {
	var x [4]byte
	binary.BigEndian.PutUint32(x[:], v)
	b.attr(typ, x[:])
}

func (b *nlBatch) u64(typ uint16, v uint64) {
	var x [8]byte
	binary.BigEndian.PutUint64(x[:], v)
	b.attr(typ, x[:])
}

// open starts a nested attribute; close ends the innermost one.
func (b *nlBatch) open(typ uint16) {
	b.nest = append(b.nest, len(b.buf))
	b.buf = append(b.buf, 0, 0, 0, 0)
	binary.NativeEndian.PutUint16(b.buf[len(b.buf)-2:], typ|nlaNested)
}

func (b *nlBatch) close() {
	n := len(b.nest) - 1
	start := b.nest[n]
	b.nest = b.nest[:n]
	l := len(b.buf) - start
	if l > 0xffff {
		// Callers keep nested lists (set elements) well below this.
		panic(fmt.Sprintf("netlink attribute of %d bytes", l))
	}
	binary.NativeEndian.PutUint16(b.buf[start:], uint16(l))
}

// dataValue writes an NFTA_DATA_VALUE nested in typ.
func (b *nlBatch) dataValue(typ uint16, v []byte) {
	b.open(typ)
	b.attr(unix.NFTA_DATA_VALUE, v)
	b.close()
}

// verdict writes an NFTA_DATA_VERDICT nested in typ.
func (b *nlBatch) verdict(typ uint16, v verdict) {
	b.open(typ)
	b.open(unix.NFTA_DATA_VERDICT)
	b.u32(unix.NFTA_VERDICT_CODE, uint32(v.code))
	if v.chain != "" {
		b.str(unix.NFTA_VERDICT_CHAIN, v.chain)
	}
	b.close()
	b.close()
}

// verdict is a rule's or a map element's verdict.
type verdict struct {
	code  int32
	chain string
}

func parseVerdict(words []string) (verdict, bool) {
	switch {
	case len(words) == 1 && words[0] == "drop":
		return verdict{code: nfDrop}, true
	case len(words) == 1 && words[0] == "accept":
		return verdict{code: nfAccept}, true
	case len(words) == 1 && words[0] == "return":
		return verdict{code: unix.NFT_RETURN}, true
	case len(words) == 2 && words[0] == "jump":
		return verdict{code: unix.NFT_JUMP, chain: words[1]}, true
	case len(words) == 2 && words[0] == "goto":
		return verdict{code: unix.NFT_GOTO, chain: words[1]}, true
	}
	return verdict{}, false
}

// ErrNotSent means the kernel did not see the batch at all (no socket,
// a batch bigger than the socket may send), so nft may still write it.
var ErrNotSent = errors.New("netlink batch not sent")

// send writes the batch through a netlink socket of its own, closed
// afterwards; see nlSocket.send.
func (b *nlBatch) send() error {
	var s nlSocket
	defer s.close()
	return s.send(b)
}

// nlSocket is a netlink socket kept open from one batch to the next.
// Closing a netfilter socket waits for the kernel to free the last
// transaction's objects (nf_tables flushes its destroy work, an RCU
// grace period or more), so a writer keeps
// one for good. Its zero value has no socket yet.
type nlSocket struct {
	fd   int
	open bool
}

func (s *nlSocket) close() {
	if s.open {
		unix.Close(s.fd)
		s.open = false
	}
}

// send writes the batch and waits for the kernel's answer. The kernel
// processes a batch while sendmsg runs; only the last message asks for
// an acknowledgement, and any message that failed answers with an error.
// Any failure closes the socket, so the next batch starts on a clean one.
func (s *nlSocket) send(b *nlBatch) (err error) {
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	last := b.seq
	// Ask the last operation for an acknowledgement: it arrives once the
	// batch committed, or an error does.
	binary.NativeEndian.PutUint16(b.buf[b.msgStart+6:], binary.NativeEndian.Uint16(b.buf[b.msgStart+6:])|unix.NLM_F_ACK)
	b.control(unix.NFNL_MSG_BATCH_END)

	if !s.open {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("%w: open netlink socket: %w", ErrNotSent, err)
		}
		s.fd, s.open = fd, true
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return fmt.Errorf("%w: bind netlink socket: %w", ErrNotSent, err)
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
		// Errors without a copy of the failed message: an element
		// message is up to 64 KiB, and a few dozen failed ones would
		// overflow the receive buffer and hide every reason.
		_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
		tv := unix.Timeval{Sec: 30}
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	fd := s.fd
	// The whole batch goes in one message, so the send buffer must hold it.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, len(b.buf)+4096); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, len(b.buf)+4096)
	}
	if err := unix.Sendto(fd, b.buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		// The kernel processes a batch inside sendmsg; an error of
		// sendmsg itself means it did not get it.
		return fmt.Errorf("%w: send netlink batch of %d bytes: %w", ErrNotSent, len(b.buf), err)
	}
	var errs []error
	rb := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, rb, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return errors.Join(append(errs, fmt.Errorf("read netlink answer: %w", err))...)
		}
		msgs, err := syscall.ParseNetlinkMessage(rb[:n])
		if err != nil {
			return fmt.Errorf("parse netlink answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4+16 {
				continue
			}
			code := int32(binary.NativeEndian.Uint32(m.Data))
			seq := binary.NativeEndian.Uint32(m.Data[4+8:])
			if code != 0 {
				errs = append(errs, fmt.Errorf("%s: %w", b.name(seq), syscall.Errno(-code)))
			}
			if seq == last {
				if err := errors.Join(errs...); err != nil {
					return err
				}
				return s.drain()
			}
			if code != 0 && seq == 2 {
				// Perhaps the commit failed: the kernel answers that on
				// the first operation (it has stripped the batch-begin
				// message), and nothing after.
				return errors.Join(errs...)
			}
		}
		if len(errs) >= 100 {
			return errors.Join(errs...) // enough to go on
		}
	}
}

// drain reads what the kernel queued after the acknowledgement, if
// anything, so the next batch reads only its own answers; an error
// found there is the batch's.
func (s *nlSocket) drain() error {
	rb := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(s.fd, rb, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read netlink answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(rb[:n])
		if err != nil {
			return fmt.Errorf("parse netlink answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
					return fmt.Errorf("netlink message %d: %w", binary.NativeEndian.Uint32(m.Data[4+8:]), syscall.Errno(-code))
				}
			}
		}
	}
}

// name says what message seq did.
func (b *nlBatch) name(seq uint32) string {
	switch {
	case seq == 2 && len(b.what) > 1 && b.what[1] >= 0 && b.describe != nil:
		return "commit, or " + b.describe(b.what[1])
	case seq == 0 || int(seq) > len(b.what) || b.what[seq-1] < 0 || b.describe == nil:
		return fmt.Sprintf("netlink message %d", seq)
	}
	return b.describe(b.what[seq-1])
}
