//go:build linux

package userspace

// This file is the set-up of a connection on an event loop: accepting
// it, choosing an endpoint and connecting to it, retrying another when a
// connect fails or takes too long.

import (
	"errors"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// accept takes the connections queued on the listener, up to maxAccept;
// with more waiting, the listener goes on the ready list.
func (l *evLoop) accept(ln *evListener) {
	var retry bool
	taken := 0
	cerr := ln.rc.Control(func(lfd uintptr) {
		for {
			if taken == maxAccept {
				if !ln.queued {
					ln.queued = true
					l.ready = append(l.ready, evReady{ln: ln})
				}
				return
			}
			fd, client, err := rawAccept(int(lfd))
			switch err {
			case nil:
				taken++
				l.serve(ln.f, fd, client)
				continue
			case unix.EAGAIN:
			case unix.EINTR, unix.ECONNABORTED:
				continue
			default:
				// Out of descriptors or memory: try again a bit later,
				// as the edge that woke us will not come again.
				klog.V(2).InfoS("Accept failed", "frontend", ln.f.key.addr, "err", err)
				retry = true
			}
			return
		}
	})
	if cerr != nil {
		return // the listener is closed; removeListener frees the slot
	}
	if retry {
		time.AfterFunc(10*time.Millisecond, func() {
			l.post(func() {
				if l.lns[ln.f] == ln {
					l.accept(ln)
				}
			})
		})
	}
}

func resetCloseFD(fd int) {
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
	rawClose(fd)
}

// serve takes an accepted connection: it is refused, or connected to an
// endpoint.
func (l *evLoop) serve(f *frontend, fd int, client netip.AddrPort) {
	r := f.route.Load()
	if !r.allowed(client.Addr()) {
		r.sp.deniedCounter().Inc()
		resetCloseFD(fd)
		return
	}
	c := &evConn{l: l, f: f, r: r, client: client, fd: [2]int{fd, -1}}
	c.conn = Conn{Client: client, Frontend: f.key.addr}
	if r.byFrontend && f.key.addr.Addr().IsUnspecified() {
		c.conn.Frontend = rawGetsockname(fd)
	}
	c.tok[0] = l.slot()
	l.slots[c.tok[0]].c = c
	if err := l.add(fd, c.tok[0], unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP); err != nil {
		klog.ErrorS(err, "Cannot watch connection")
		l.release(c.tok[0])
		resetCloseFD(fd)
		return
	}
	c.tok[1] = l.slot()
	l.slots[c.tok[1]].c = c
	l.slots[c.tok[1]].up = true
	l.conns[c] = struct{}{}
	l.dial(c)
}

// dial connects c to the next endpoint; when none is left, the client
// gets a reset.
func (l *evLoop) dial(c *evConn) {
	r := c.r
	now := time.Now()
	for range r.backends {
		var i int
		if c.tried == nil {
			i = r.pick(c.conn, nil, now)
		} else {
			i = r.pick(c.conn, func(i int) bool { return c.tried[i] }, now)
		}
		if i < 0 {
			break
		}
		b := r.backends[i]
		err := l.connect(c, b)
		if err == nil {
			return
		}
		l.failed(c, i, err)
	}
	l.closeConn(c, true)
}

// errEndpointGone fails a connect that completed after its endpoint was
// removed: the connection goes to another endpoint.
var errEndpointGone = errors.New("endpoint removed during the connect")

func (l *evLoop) failed(c *evConn, i int, err error) {
	b := c.r.backends[i]
	if err != errEndpointGone {
		b.stats().failures.Inc()
	}
	klog.V(3).InfoS("Connect to endpoint failed; trying the next", "endpoint", b.name, "err", err)
	if c.tried == nil {
		c.tried = make([]bool, len(c.r.backends))
	}
	c.tried[i] = true
	c.b = nil
}

// connect starts a connect to b; a nil error means it is done or under way.
func (l *evLoop) connect(c *evConn, b *backend) error {
	fd, err := rawConnect(b.addr)
	if err != nil && err != unix.EINPROGRESS {
		return os.NewSyscallError("connect", err)
	}
	// Events for an earlier endpoint's socket carry the old generation.
	up := &l.slots[c.tok[1]]
	up.gen++
	if aerr := l.add(fd, c.tok[1], unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP); aerr != nil {
		rawClose(fd)
		return aerr
	}
	c.fd[1], c.b = fd, b
	c.rd[1], c.wr[1], c.hup[1] = false, false, false
	if err == nil {
		l.open(c)
		return nil
	}
	c.deadline = time.Now().Add(l.p.cfg.DialTimeout)
	if l.armed.IsZero() || c.deadline.Before(l.armed) {
		l.arm(c.deadline)
	}
	if len(l.connecting) >= 256 && len(l.connecting) == cap(l.connecting) {
		l.compact()
	}
	l.connecting = append(l.connecting, c)
	return nil
}

// compact drops the connections that are no longer connecting.
func (l *evLoop) compact() {
	k := 0
	for _, c := range l.connecting {
		if c.state == connConnecting && !c.deadline.IsZero() {
			l.connecting[k] = c
			k++
		}
	}
	clear(l.connecting[k:])
	l.connecting = l.connecting[:k]
}

// arm sets the deadline at which the loop wakes to fail connects.
func (l *evLoop) arm(t time.Time) {
	if !t.Equal(l.armed) {
		l.armed = t
		l.file.SetReadDeadline(t)
	}
}

// connectDone handles the first events of a connecting endpoint socket.
func (l *evLoop) connectDone(c *evConn, events uint32) {
	if events&(unix.EPOLLERR|unix.EPOLLHUP) == 0 && events&unix.EPOLLOUT != 0 {
		l.open(c)
		return
	}
	if events&(unix.EPOLLERR|unix.EPOLLHUP) == 0 {
		return
	}
	err := unix.ECONNREFUSED
	if e, gerr := unix.GetsockoptInt(c.fd[1], unix.SOL_SOCKET, unix.SO_ERROR); gerr == nil && e != 0 {
		err = unix.Errno(e)
	}
	l.retry(c, os.NewSyscallError("connect", err))
}

// retry drops the endpoint socket of c, whose connect failed, and tries
// the next endpoint.
func (l *evLoop) retry(c *evConn, err error) {
	rawClose(c.fd[1])
	c.fd[1] = -1
	for i, b := range c.r.backends {
		if b == c.b {
			l.failed(c, i, err)
			break
		}
	}
	l.dial(c)
}

// expire runs when the armed deadline has passed: it fails the connects
// that are late and arms the earliest deadline left. The list is not in
// deadline order: a connection whose connect failed fast is appended
// again with a later deadline, while its first entry stays where it
// was. A connect that completes does not disarm anything:
// changing a deadline costs a timer update, and a wake-up for nothing
// once per DialTimeout costs less.
func (l *evLoop) expire(now time.Time) {
	var late []*evConn
	for _, c := range l.connecting {
		if c.state == connConnecting && !c.deadline.IsZero() && !now.Before(c.deadline) {
			c.deadline = time.Time{}
			late = append(late, c)
		}
	}
	l.compact()
	for _, c := range late {
		if c.state == connConnecting {
			l.retry(c, os.ErrDeadlineExceeded)
		}
	}
	next := time.Time{}
	for _, c := range l.connecting {
		if next.IsZero() || c.deadline.Before(next) {
			next = c.deadline
		}
	}
	l.arm(next)
}
