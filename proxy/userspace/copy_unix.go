//go:build unix

package userspace

import (
	"net"
	"sync"
	"syscall"
)

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copySmall copies with read and write until EOF, an error, or errBulk.
// The buffer is taken from the pool only once src is readable, so an
// idle connection holds none (HAProxy does the same).
func copySmall(dst, src *net.TCPConn) (int64, error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		total int64
		bp    *[]byte
		n     int
		rerr  error
	)
	read := func(fd uintptr) bool {
		bp = copyBufs.Get().(*[]byte)
		for {
			n, rerr = syscall.Read(int(fd), *bp)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			copyBufs.Put(bp)
			return false // wait until readable, then call again
		}
		return true
	}
	for {
		if err := rc.Read(read); err != nil {
			return total, err
		}
		if rerr != nil {
			copyBufs.Put(bp)
			return total, rerr
		}
		if n <= 0 {
			copyBufs.Put(bp)
			return total, nil // EOF
		}
		_, werr := dst.Write((*bp)[:n])
		full := n == len(*bp)
		copyBufs.Put(bp)
		total += int64(n)
		if werr != nil {
			return total, werr
		}
		if full {
			return total, errBulk
		}
	}
}
