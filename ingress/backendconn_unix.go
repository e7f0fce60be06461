//go:build unix

package ingress

import (
	"errors"
	"syscall"
)

// alive says whether c may carry a request as far as can be told without
// waiting: the endpoint has neither closed it nor sent anything since its
// last response. It costs a system call, asked before each request on a
// pooled connection.
func (c *backendConn) alive() bool {
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	idle := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		idle = errors.Is(err, syscall.EAGAIN)
		return true
	})
	return err == nil && idle
}
