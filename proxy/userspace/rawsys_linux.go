//go:build linux

package userspace

import (
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The event loop's system calls. Every descriptor they touch is
// non-blocking, so they go through RawSyscall: a plain Syscall tells the
// scheduler the goroutine may block, and the system monitor then hands
// the loop's P to another thread whenever a call (a connect with its
// handshake, a close with its FIN) outlasts the monitor's tick, which costs
// a thread wake-up per connection or so. The wrappers also build and
// parse the socket addresses in place: x/sys's Accept4 asks each accepted
// socket its protocol (one getsockopt more) and allocates the address.

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func rawRead(fd int, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, errnoErr(e)
	}
	return int(n), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, errnoErr(e)
	}
	return int(n), nil
}

func rawSplice(in, out, n int) (int, error) {
	r, _, e := syscall.RawSyscall6(unix.SYS_SPLICE, uintptr(in), 0, uintptr(out), 0, uintptr(n),
		unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
	if e != 0 {
		return 0, errnoErr(e)
	}
	return int(r), nil
}

func rawClose(fd int) {
	syscall.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

func rawShutdownWrite(fd int) {
	syscall.RawSyscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
}

func rawSetsockoptInt(fd, level, opt, v int) {
	val := int32(v)
	syscall.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&val)), 4, 0)
}

// rawAccept accepts a connection as a non-blocking socket and returns the
// client's address.
func rawAccept(lfd int) (int, netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	size := uint32(unix.SizeofSockaddrAny)
	fd, _, e := syscall.RawSyscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&size)),
		unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, netip.AddrPort{}, errnoErr(e)
	}
	return int(fd), rawAddrPort(&rsa), nil
}

func rawGetsockname(fd int) netip.AddrPort {
	var rsa unix.RawSockaddrAny
	size := uint32(unix.SizeofSockaddrAny)
	_, _, e := syscall.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&size)))
	if e != 0 {
		return netip.AddrPort{}
	}
	return rawAddrPort(&rsa)
}

func rawAddrPort(rsa *unix.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(p[0])<<8|uint16(p[1]))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(p[0])<<8|uint16(p[1]))
	}
	return netip.AddrPort{}
}

// rawConnect opens a non-blocking TCP socket (TCP_NODELAY) and starts its
// connect to ap. The error is the connect's: EINPROGRESS while under way.
func rawConnect(ap netip.AddrPort) (int, error) {
	var rsa unix.RawSockaddrAny
	var size uintptr
	domain := unix.AF_INET
	if ap.Addr().Is4() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		sa.Family = unix.AF_INET
		sa.Addr = ap.Addr().As4()
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(ap.Port()>>8), byte(ap.Port())
		size = unix.SizeofSockaddrInet4
	} else {
		domain = unix.AF_INET6
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		sa.Family = unix.AF_INET6
		sa.Addr = ap.Addr().As16()
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(ap.Port()>>8), byte(ap.Port())
		size = unix.SizeofSockaddrInet6
	}
	fd, _, e := syscall.RawSyscall(unix.SYS_SOCKET, uintptr(domain), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if e != 0 {
		return -1, errnoErr(e)
	}
	// Answers are written as they come: Nagle would hold the second
	// write of an answer for the peer's delayed ACK.
	rawSetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_, _, e = syscall.RawSyscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&rsa)), size)
	if e != 0 && e != unix.EINPROGRESS {
		rawClose(int(fd))
		return -1, e
	}
	return int(fd), errnoErr(e)
}

// rawEpollWait returns the ready events without waiting.
func rawEpollWait(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))),
		uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, errnoErr(e)
	}
	return int(n), nil
}
