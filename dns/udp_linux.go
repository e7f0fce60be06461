//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || s390x || riscv64 || loong64)

package dns

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func listenUDP(addr string, port int, reusePort bool) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		if !reusePort {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// batchSize is how many packets one recvmmsg/sendmmsg moves.
const batchSize = 32

// mmsghdr is struct mmsghdr of linux/socket.h.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte // padding: this file builds for 64-bit platforms only
}

// batch is the state of one socket's recvmmsg/sendmmsg loop. Every buffer
// is allocated once; the syscall closures are bound once, so the loop does
// not allocate.
type batch struct {
	rc      syscall.RawConn
	rhdrs   [batchSize]mmsghdr
	riovs   [batchSize]unix.Iovec
	names   [batchSize]unix.RawSockaddrInet6
	in      [batchSize][]byte
	out     [batchSize][]byte
	shdrs   [batchSize]mmsghdr
	siovs   [batchSize]unix.Iovec
	n       int
	nsend   int
	off     int
	errno   syscall.Errno
	readFn  func(uintptr) bool
	writeFn func(uintptr) bool
}

func newBatch(c *net.UDPConn) (*batch, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	b := &batch{rc: rc}
	for i := range batchSize {
		b.in[i] = make([]byte, 65535)
		b.out[i] = make([]byte, 4096)
		b.riovs[i].Base = &b.in[i][0]
		b.riovs[i].SetLen(len(b.in[i]))
		b.rhdrs[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.rhdrs[i].hdr.Iov = &b.riovs[i]
		b.rhdrs[i].hdr.SetIovlen(1)
	}
	b.readFn = b.recv
	b.writeFn = b.send
	return b, nil
}

func (b *batch) recv(fd uintptr) bool {
	for i := range batchSize {
		b.rhdrs[i].hdr.Namelen = unix.SizeofSockaddrInet6
		b.rhdrs[i].len = 0
	}
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.rhdrs[0])), batchSize, unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	b.errno = e
	b.n = int(n)
	return true
}

func (b *batch) send(fd uintptr) bool {
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.shdrs[b.off])), uintptr(b.nsend-b.off), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	if e != 0 {
		b.off++ // skip the message the kernel refused (e.g. an unroutable address)
	} else {
		b.off += int(n)
	}
	return true
}

// family reads the address family of packet i's source.
func (b *batch) family(i int) int {
	if b.names[i].Family == unix.AF_INET6 {
		a := netip.AddrFrom16(b.names[i].Addr)
		if !a.Is4In6() {
			return famIPv6
		}
	}
	return famIPv4
}

// from reads the source address of packet i.
func (b *batch) from(i int) netip.AddrPort {
	n := &b.names[i]
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&n.Port))[:])
	if n.Family == unix.AF_INET {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(n))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(n.Addr).Unmap(), port)
}

// serveUDP reads a batch of packets with one recvmmsg, answers them and
// sends the answers with one sendmmsg, until the socket is closed.
func (s *Server) serveUDP(ctx context.Context, c *net.UDPConn, wg *sync.WaitGroup) {
	b, err := newBatch(c)
	if err != nil {
		return
	}
	w := newWorker(s)
	for {
		b.errno, b.n = 0, 0
		if err := b.rc.Read(b.readFn); err != nil {
			return // closed
		}
		if b.errno != 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		b.nsend = 0
		for i := range b.n {
			fam := b.family(i)
			resp, fwd := w.handle(b.in[i][:b.rhdrs[i].len], b.out[i], fam)
			if fwd != nil {
				s.forwardAsync(ctx, wg, c, fwd, b.from(i), fam)
				continue
			}
			if resp == nil {
				continue
			}
			j := b.nsend
			b.siovs[j].Base = &resp[0]
			b.siovs[j].SetLen(len(resp))
			b.shdrs[j].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
			b.shdrs[j].hdr.Namelen = b.rhdrs[i].hdr.Namelen
			b.shdrs[j].hdr.Iov = &b.siovs[j]
			b.shdrs[j].hdr.SetIovlen(1)
			b.nsend++
		}
		b.off = 0
		for b.off < b.nsend {
			if err := b.rc.Write(b.writeFn); err != nil {
				return
			}
		}
	}
}
