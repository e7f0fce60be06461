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
	if c.rawConn == nil {
		sc, ok := c.conn.(syscall.Conn)
		if !ok {
			return true
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		c.rawConn, c.peekFunc = raw, c.peekIdle
	}
	c.idle = false
	err := c.rawConn.Read(c.peekFunc)
	return err == nil && c.idle
}

// peekIdle notes in c.idle whether fd has nothing to read yet.
func (c *backendConn) peekIdle(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	c.idle = errors.Is(err, syscall.EAGAIN)
	return true
}
