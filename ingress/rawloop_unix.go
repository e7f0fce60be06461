//go:build unix

package ingress

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A plain connection's loop runs inside one raw read of it, so that the
// read of a keep-alive client's next request can wait for the poller
// first instead of finding nothing: Go's Read tries the read and then
// waits, which costs a system call for each request (EAGAIN), because a
// read or raw read forgets, as it starts, the readiness the poller noted
// before it. Inside one raw read nothing is forgotten: whatever the
// client sends while a request is served marks the connection readable,
// and the wait after the answer ends at once. Only the connection's
// first read, before anything was waited for, reads first.
//
// The watch on the client during a long request cannot read the
// connection then: it waits on a duplicate of its descriptor, with a
// readiness of its own, and peeks (watchRaw).

// clientReader is what the loop's buffered reader reads: the connection,
// or its descriptor while the loop runs inside the raw read.
type clientReader struct {
	conn  io.Reader
	inRaw bool
	fd    int
	// ready says the client may have sent something not read yet:
	// the poller said the connection was readable, or the last read
	// filled what it was given.
	ready bool
}

func (r *clientReader) Read(p []byte) (int, error) {
	if !r.inRaw {
		return r.conn.Read(p)
	}
	if !r.ready {
		return 0, errWouldBlock
	}
	for {
		n, err := syscall.Read(r.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			r.ready = false
			return 0, errWouldBlock
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		// A read that did not fill p emptied the socket: whatever
		// comes next makes the poller say so.
		r.ready = n == len(p)
		return n, nil
	}
}

// loopRaw runs the loop inside one raw read of the connection, when it
// is a plain one that has a descriptor, and says whether it did and how
// the loop ended.
func (c *h1Conn) loopRaw() (bool, error) {
	if c.tlsState != nil {
		return false, nil
	}
	sc, ok := c.raw.(syscall.Conn)
	if !ok {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	c.in.inRaw = true
	err = rc.Read(c.step)
	c.in.inRaw = false
	c.stopWatchRaw()
	if err != nil {
		return true, err
	}
	return true, c.loopErr
}

// step is the raw read's: it serves requests until one needs to wait for
// the client, and says whether the loop ended (c.loopErr says how).
// Every call but the first follows the poller's word that the
// connection is readable. The first reads before it waits: what came
// before the raw read began is there without that word.
func (c *h1Conn) step(fd uintptr) bool {
	c.in.fd, c.in.ready = int(fd), true
	c.loopErr = c.loop()
	return c.loopErr != errWouldBlock
}

// watchRaw starts the watch of a client whose connection the loop holds
// in its raw read: a goroutine waits on a duplicate of the descriptor
// until the client sends something or goes away, and peeks to tell
// which. What it sent stays in the connection, readable for the loop.
// Called with c.mu held, while a request is served: the descriptor is
// the connection's until the loop leaves the raw read.
func (c *h1Conn) watchRaw() bool {
	fd, err := unix.FcntlInt(uintptr(c.in.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "client")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return false
	}
	c.watchFile = f
	go c.watchDuplicate(rc)
	return true
}

func (c *h1Conn) watchDuplicate(rc syscall.RawConn) {
	gone := false
	var b [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		for err == syscall.EINTR {
			n, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		}
		if err == syscall.EAGAIN {
			return false
		}
		gone = err != nil || n == 0
		return true
	})
	if gone {
		c.end()
	}
	c.watched <- struct{}{}
}

// stopWatchRaw ends the watch on the duplicate, if one runs, and waits
// for it.
func (c *h1Conn) stopWatchRaw() {
	if c.watchFile == nil {
		return
	}
	c.watchFile.Close()
	<-c.watched
	c.watching, c.watchFile = false, nil
}
