//go:build unix

package ingress

import (
	"errors"
	"os"
	"syscall"
)

// alive says whether c may carry a request as far as can be told without
// waiting: the endpoint has neither closed it nor sent anything since its
// last response. It costs a system call, asked before each request on a
// pooled connection.
func (c *backendConn) alive() bool {
	if !c.raw() {
		return c.rawConn == nil
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

// raw makes what alive and sendAndAwait need, once, and says whether the
// connection has a raw one: rawConn is left nil when it has none, and
// set to a broken one when it failed.
func (c *backendConn) raw() bool {
	if c.rawConn == nil {
		sc, ok := c.conn.(syscall.Conn)
		if !ok {
			return false
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			c.rawConn = brokenRawConn{err}
			return false
		}
		c.rawConn, c.peekFunc, c.sendFunc = raw, c.peekIdle, c.sendThenWait
	}
	_, broken := c.rawConn.(brokenRawConn)
	return !broken
}

// sendAndAwait writes head to the endpoint and waits until the answer
// can be read, with the poller armed before the write: a read of the
// answer then finds it, where a read right after the write finds nothing
// yet and costs a system call for that. It says false when it did not
// write head whole (c.written says how much went): a partial write, one
// that would block, or no raw connection. An error is the write's, or
// the wait's (the read timeout, the request's end).
//
// The write and the wait are one raw read because a raw read forgets the
// readiness the poller noted before it started: a wait begun after the
// write would miss an answer that came in between, and wait for the read
// timeout. The client's side has the same answer at a larger scale: the
// loop runs inside one raw read of the client's connection (loopRaw).
func (c *backendConn) sendAndAwait(head []byte) (bool, error) {
	if !c.raw() {
		return false, nil
	}
	c.unsentHead, c.sendDone, c.sendErr = head, false, nil
	err := c.rawConn.Read(c.sendFunc)
	c.unsentHead = nil
	switch {
	case c.sendErr != nil:
		return false, c.sendErr
	case !c.sendDone:
		return false, nil
	}
	return true, err
}

// sendThenWait is sendAndAwait's step of the raw read: its first call
// writes, and asks to wait when the write went whole; the next, once the
// connection is readable, ends the wait.
func (c *backendConn) sendThenWait(fd uintptr) bool {
	if c.sendDone {
		return true
	}
	n, err := syscall.Write(int(fd), c.unsentHead)
	if n > 0 {
		c.written += n
	}
	if err != nil || n < len(c.unsentHead) {
		if err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR) {
			c.sendErr = os.NewSyscallError("write", err)
		}
		return true
	}
	c.sendDone = true
	return false
}

// brokenRawConn stands for a raw connection that could not be had.
type brokenRawConn struct{ err error }

func (b brokenRawConn) Control(func(uintptr)) error    { return b.err }
func (b brokenRawConn) Read(func(uintptr) bool) error  { return b.err }
func (b brokenRawConn) Write(func(uintptr) bool) error { return b.err }
