//go:build linux

package userspace

// This file is the copying of an open connection on an event loop: the
// splices through a pipe in each direction, half-closes, and the close.

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// endpoint has succeeded.
var testHookConnected func(endpoint string)

// open starts copying: the endpoint is connected.
func (l *evLoop) open(c *evConn) {
	c.deadline = time.Time{}
	b := c.b
	if testHookConnected != nil {
		testHookConnected(b.name)
	}
	if !b.track(c) {
		// The endpoint left while the connect was under way: as a
		// failed connect, the client goes to the next one.
		l.retry(c, errEndpointGone)
		return
	}
	c.state = connOpen
	c.r.remember(c.client.Addr(), b, time.Now())
	m := b.stats()
	b.active.Add(1)
	m.conns.Inc()
	m.active.Inc()
	c.wr[1] = true
	l.pump(c, 0)
	l.pump(c, 1)
}

// Close closes the connection from any goroutine (a drain's end).
func (c *evConn) Close() error {
	c.l.post(func() { c.l.closeConn(c, false) })
	return nil
}

func (c *evConn) drains() bool { return true }

// closeConn closes both sockets; reset sends the client a reset (no
// endpoint would take the connection).
func (l *evLoop) closeConn(c *evConn, reset bool) {
	if c.state == connClosed {
		return
	}
	wasOpen := c.state == connOpen
	c.state = connClosed
	delete(l.conns, c)
	if reset {
		resetCloseFD(c.fd[0])
	} else {
		rawClose(c.fd[0])
	}
	if c.fd[1] >= 0 {
		rawClose(c.fd[1])
	}
	l.release(c.tok[0])
	l.release(c.tok[1])
	for i := range c.dir {
		h := &c.dir[i]
		if h.pend != nil {
			copyBufs.Put(h.pend)
			h.pend = nil
		}
		if h.piped {
			l.putPipe(h.pipe, h.inPipe == 0)
			h.piped = false
		}
	}
	if !wasOpen {
		return
	}
	b := c.b
	m := b.stats()
	m.toEndpoint.Add(float64(c.dir[0].bytes))
	m.toClient.Add(float64(c.dir[1].bytes))
	b.active.Add(-1)
	m.active.Dec()
	b.untrack(c) // last: it may delete the series
}

func (l *evLoop) getPipe() (evPipe, error) {
	if n := len(l.pipes); n > 0 {
		p := l.pipes[n-1]
		l.pipes = l.pipes[:n-1]
		return p, nil
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return evPipe{}, os.NewSyscallError("pipe2", err)
	}
	// A pipe as large as one splice, as Go's; a smaller one only costs
	// more calls. Without CAP_SYS_RESOURCE it fails once the user's pipes
	// hold pipe-user-pages-soft; the transfer goes on in a small pipe.
	if _, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, maxSplice); err != nil && !pipeSizeFailed.Swap(true) {
		klog.InfoS("Cannot enlarge the splice pipes; bulk transfers use small ones (raise fs.pipe-user-pages-soft?)",
			"err", os.NewSyscallError("fcntl F_SETPIPE_SZ", err))
	}
	return evPipe{r: fds[0], w: fds[1]}, nil
}

func (l *evLoop) putPipe(p evPipe, empty bool) {
	if empty && len(l.pipes) < maxPipes {
		l.pipes = append(l.pipes, p)
		return
	}
	unix.Close(p.r)
	unix.Close(p.w)
}

// pump moves what it can in direction d (0: client to endpoint, 1: back)
// until a side would block, the source ends, an error closes c, or it
// has read its budget (then c goes on the ready list).
func (l *evLoop) pump(c *evConn, d int) {
	h := &c.dir[d]
	src, dst := d, 1-d
	moved := 0
	for c.state == connOpen && !h.done {
		if h.pend != nil || h.inPipe > 0 {
			if !c.wr[dst] || !l.flush(c, h, dst) {
				return
			}
			continue
		}
		if h.eof {
			h.done = true
			l.dropPipe(h)
			l.ended(c, dst)
			return
		}
		if !c.rd[src] || !c.wr[dst] {
			return
		}
		if moved >= l.budget {
			l.yield(c)
			return
		}
		if h.bulk && !h.piped {
			if p, err := l.getPipe(); err == nil {
				h.pipe, h.piped = p, true
			} else {
				h.bulk = false // copy through the buffer; a full read tries again
			}
		}
		if h.bulk {
			n, err := rawSplice(c.fd[src], h.pipe.w, maxSplice)
			if err == unix.EINTR {
				continue
			}
			if !l.readDone(c, src, h, n, err) {
				if h.eof {
					continue
				}
				// The pipe is empty and the source has nothing now:
				// an idle connection holds no pipe.
				l.dropPipe(h)
				return
			}
			h.inPipe = n
			moved += n
			continue
		}
		n, err := rawRead(c.fd[src], l.buf)
		if err == unix.EINTR {
			continue
		}
		if !l.readDone(c, src, h, n, err) {
			if h.eof {
				continue
			}
			return
		}
		moved += n
		if n < len(l.buf) && !c.hup[src] {
			// A short read emptied the socket. What comes next, data or
			// the FIN, raises a new edge; a FIN that came before the read
			// was in the event (EPOLLRDHUP), so the read that would only
			// say EAGAIN is saved.
			c.rd[src] = false
		}
		if n == len(l.buf) {
			// A full read marks a bulk transfer: from now on the bytes
			// go through a pipe and never enter user space.
			h.bulk = true
		}
		w, err := rawWrite(c.fd[dst], l.buf[:n])
		h.bytes += int64(w)
		if w < n {
			if err != nil && err != unix.EAGAIN {
				l.closeConn(c, false)
				return
			}
			c.wr[dst] = false
			h.pend = copyBufs.Get().(*[]byte)
			h.n = copy(*h.pend, l.buf[w:n])
			h.off = 0
		}
	}
}

// dropPipe gives h's pipe back to the pool, if h holds an empty one.
func (l *evLoop) dropPipe(h *evHalf) {
	if h.piped && h.inPipe == 0 {
		l.putPipe(h.pipe, true)
		h.piped = false
	}
}

// readDone handles a read or splice from src's socket; it reports whether
// n bytes came.
func (l *evLoop) readDone(c *evConn, src int, h *evHalf, n int, err error) bool {
	switch {
	case err == unix.EAGAIN:
		c.rd[src] = false
		return false
	case err != nil:
		l.closeConn(c, false)
		return false
	case n == 0:
		h.eof = true
		return false
	}
	return true
}

// flush writes h's pending bytes to dst; it reports whether all went.
func (l *evLoop) flush(c *evConn, h *evHalf, dst int) bool {
	for h.pend != nil || h.inPipe > 0 {
		var n int
		var err error
		if h.pend != nil {
			n, err = rawWrite(c.fd[dst], (*h.pend)[h.off:h.n])
		} else {
			n, err = rawSplice(h.pipe.r, c.fd[dst], h.inPipe)
		}
		if err == unix.EAGAIN {
			c.wr[dst] = false
			return false
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			l.closeConn(c, false)
			return false
		}
		h.bytes += int64(n)
		if h.pend != nil {
			h.off += n
			if h.off == h.n {
				copyBufs.Put(h.pend)
				h.pend = nil
			}
		} else {
			h.inPipe -= n
		}
	}
	return true
}

// ended passes on a FIN: the first direction to end half-closes its
// destination; when the second ends, both sockets are closed (close(2)
// sends that FIN itself).
func (l *evLoop) ended(c *evConn, dst int) {
	if c.dir[0].done && c.dir[1].done {
		l.closeConn(c, false)
		return
	}
	rawShutdownWrite(c.fd[dst])
}
