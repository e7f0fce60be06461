//go:build linux

package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// The TCP data path on Linux is an event loop on raw non-blocking sockets,
// as HAProxy's: accept, connect and the copies of a connection run from one
// epoll set, without a goroutine, a Go netpoller registration or a net.Conn
// per connection. Go's net package wakes several goroutines several times
// for each proxied connection, and the scheduler, the netpoller, timers and
// the collector then cost a large share of the proxy's CPU; the loop spends
// its CPU in the system calls, which are the same as HAProxy's.
//
// The loop's epoll descriptor is itself waited on through Go's netpoller
// (an epoll set is pollable), so the loop goroutine parks like any other
// and needs no thread of its own. Every socket is registered once, edge
// triggered, for reading and writing; the loop remembers which sides are
// readable and writable and clears that when a call returns EAGAIN, so no
// epoll_ctl is needed after a socket is added.

const (
	evBatch   = 256     // events taken per epoll_wait
	maxSplice = 1 << 20 // bytes per splice(2), as Go's own splice
	maxPipes  = 16      // idle pipes kept for the next bulk transfer
	wakeIdx   = 0       // the slot of the loop's eventfd

	// maxAccept bounds the connections taken per wake-up of a listener
	// (HAProxy's maxaccept), and pumpBudget the bytes one direction of a
	// connection moves per turn: a flood of new connections or one fast
	// bulk stream must not hold the loop while the others wait. What is
	// left goes on the ready list, served after the next batch of events.
	maxAccept  = 64
	pumpBudget = 256 << 10
)

// pipeSizeFailed is set once F_SETPIPE_SZ failed (logged once per process).
var pipeSizeFailed atomic.Bool

// evLoop is one event loop. Only its own goroutine touches its sockets and
// state; other goroutines hand it work through post.
type evLoop struct {
	p      *Proxier
	epfd   int
	file   *os.File // epfd, for Go's netpoller
	wakefd int      // eventfd that wakes the loop for posted work
	events []unix.EpollEvent
	slots  []evSlot // by token index; 0 is the eventfd
	free   []uint32
	buf    []byte // the read buffer of small messages, shared by all connections
	pipes  []evPipe
	conns  map[*evConn]struct{}
	lns    map[*frontend]*evListener
	// connecting holds connections waiting for their connect, in deadline
	// order (one DialTimeout for all); armed is the read deadline set on
	// file for the first of them.
	connecting []*evConn
	armed      time.Time
	stop       bool
	err        error // epoll_wait failed: the loop cannot go on

	// ready holds the listeners and connections that stopped with work
	// left (maxAccept, pumpBudget). Edge-triggered epoll will not report
	// them again, so each turn serves them after its events.
	ready, spare []evReady
	budget       int // pumpBudget; tests make it smaller

	mu     sync.Mutex
	posted []func()
	woken  bool
	closed bool // wakefd is closed: nothing runs what is posted
}

// evSlot is what an epoll token points at: a listener or one side of a
// connection. gen changes when the slot is reused, so an event that was
// queued for the old user is dropped.
type evSlot struct {
	gen uint32
	l   *evListener
	c   *evConn
	up  bool
}

// evListener is a frontend's listening socket as a loop watches it. The
// socket is Go's: the loop accepts from it through Control, which keeps
// the descriptor open while accept4 runs, however the frontend closes it.
type evListener struct {
	f      *frontend
	rc     syscall.RawConn
	idx    uint32
	queued bool // on the ready list
}

// evReady is an entry of the ready list: a listener or a connection.
type evReady struct {
	ln *evListener
	c  *evConn
}

type evPipe struct{ r, w int }

// evConn is one proxied TCP connection.
type evConn struct {
	l        *evLoop
	f        *frontend
	r        *route
	b        *backend
	client   netip.AddrPort
	conn     Conn
	fd       [2]int    // client, endpoint
	tok      [2]uint32 // slot indexes
	rd, wr   [2]bool   // side readable / writable as far as the loop knows
	hup      [2]bool   // side's peer has sent its FIN (or the socket failed)
	dir      [2]evHalf // client to endpoint, endpoint to client
	tried    []bool    // endpoints that failed, made on the first failure
	deadline time.Time // of the connect in progress
	state    uint8
	queued   bool // on the ready list
}

const (
	connConnecting = iota
	connOpen
	connClosed
)

// evHalf is one direction of a connection.
type evHalf struct {
	pend   *[]byte // bytes read and not yet written: pend[off:n]
	off, n int
	pipe   evPipe // bulk: bytes in flight through a pipe, while piped
	inPipe int
	bulk   bool
	piped  bool // pipe is this direction's; it goes back to the pool when empty
	eof    bool // the source's EOF was read
	done   bool // and everything was written
	bytes  int64
}

// tcpLoops returns the event loops, starting them on first use; nil when
// the data path must use Go's net package (sockets injected by tests, or
// no epoll).
func (p *Proxier) tcpLoops() []*evLoop {
	p.loopOnce.Do(func() {
		if !p.rawSockets {
			return
		}
		var loops []*evLoop
		for range max(1, runtime.GOMAXPROCS(0)) {
			l, err := newEvLoop(p)
			if err != nil {
				klog.ErrorS(err, "No event loop for the TCP data path; using Go's net package")
				for _, l := range loops {
					l.close()
				}
				return
			}
			loops = append(loops, l)
		}
		for _, l := range loops {
			p.wg.Add(1)
			go l.run()
		}
		p.loops = loops
	})
	return p.loops
}

func newEvLoop(p *Proxier) (*evLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	l := &evLoop{
		p: p, epfd: epfd, wakefd: wakefd, events: make([]unix.EpollEvent, evBatch),
		slots: make([]evSlot, 1), buf: make([]byte, copyBufSize), conns: map[*evConn]struct{}{},
		lns: map[*frontend]*evListener{}, budget: pumpBudget,
	}
	if err := l.add(wakefd, wakeIdx, unix.EPOLLIN); err != nil {
		unix.Close(wakefd)
		unix.Close(epfd)
		return nil, err
	}
	// The epoll descriptor is non-blocking, so os.NewFile registers it
	// with the runtime's poller.
	l.file = os.NewFile(uintptr(epfd), "portal-evloop")
	return l, nil
}

// close releases a loop that never ran.
func (l *evLoop) close() {
	unix.Close(l.wakefd)
	l.file.Close()
}

func (l *evLoop) add(fd int, idx uint32, events uint32) error {
	ev := unix.EpollEvent{Events: events | unix.EPOLLET, Fd: int32(idx), Pad: int32(l.slots[idx].gen)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

func (l *evLoop) slot() uint32 {
	if n := len(l.free); n > 0 {
		i := l.free[n-1]
		l.free = l.free[:n-1]
		return i
	}
	l.slots = append(l.slots, evSlot{})
	return uint32(len(l.slots) - 1)
}

func (l *evLoop) release(i uint32) {
	s := &l.slots[i]
	*s = evSlot{gen: s.gen + 1}
	l.free = append(l.free, i)
}

// post runs fn on the loop's goroutine. After the loop has stopped, fn
// never runs.
func (l *evLoop) post(fn func()) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.posted = append(l.posted, fn)
	wake := !l.woken
	l.woken = true
	l.mu.Unlock()
	if wake {
		var one = [8]byte{1}
		unix.Write(l.wakefd, one[:])
	}
}

func (l *evLoop) runPosted() {
	var b [8]byte
	unix.Read(l.wakefd, b[:])
	l.mu.Lock()
	fns := l.posted
	l.posted = nil
	l.woken = false
	l.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// run is the loop's goroutine. It returns when the Proxier's context ends,
// with every connection it served closed.
func (l *evLoop) run() {
	defer l.p.wg.Done()
	stop := func() { l.stop = true }
	cancel := context.AfterFunc(l.p.ctx, func() { l.post(stop) })
	defer cancel()
	rc, err := l.file.SyscallConn()
	l.err = err
	for !l.stop && l.err == nil {
		err := rc.Read(l.poll)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			l.expire(time.Now())
			continue
		}
		if err != nil {
			l.err = err
		}
	}
	if l.err != nil && !l.stop {
		// Nothing else would tell: the listeners would just stop being
		// served. The frontends go on through Go's net package.
		klog.ErrorS(l.err, "TCP event loop failed; its connections are closed and its frontends are served by goroutines")
	}
	l.shutdown()
	if l.err != nil && !l.stop {
		l.p.loopFailed(l)
	}
}

// loopFailed takes l, a loop that stopped on an error, out of service:
// new frontends do without it, and a frontend no other loop accepts for
// is served by goroutines (frontend.serveTCP). That keeps the node's
// Services up without a restart, which would cost every connection of
// the other loops too.
func (p *Proxier) loopFailed(l *evLoop) {
	if p.ctx.Err() != nil {
		return
	}
	without := func(ls []*evLoop) []*evLoop {
		return slices.DeleteFunc(slices.Clone(ls), func(x *evLoop) bool { return x == l })
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loops = without(p.loops)
	for _, f := range p.frontends {
		if f.ln == nil || !slices.Contains(f.loops, l) {
			continue
		}
		f.loops = without(f.loops)
		if len(f.loops) == 0 {
			p.wg.Add(1)
			go f.serveTCP()
		}
	}
}

// shutdown closes every connection and descriptor of the loop; what is
// posted afterwards never runs.
func (l *evLoop) shutdown() {
	for c := range l.conns {
		l.closeConn(c, false)
	}
	for _, p := range l.pipes {
		unix.Close(p.r)
		unix.Close(p.w)
	}
	l.pipes = nil
	l.mu.Lock()
	l.closed = true
	l.posted = nil
	l.mu.Unlock()
	unix.Close(l.wakefd)
	l.file.Close()
}

// poll handles the ready events and the ready list. It returns false
// (wait for more) when no work is left, true when the loop must stop.
// Under load it never returns false, so it fails late connects itself.
func (l *evLoop) poll(uintptr) bool {
	for {
		more := l.turn()
		if l.stop || l.err != nil {
			return true
		}
		if !more {
			return false
		}
		if !l.armed.IsZero() {
			if now := time.Now(); !now.Before(l.armed) {
				l.expire(now)
			}
		}
	}
}

// turn handles one batch of events, then serves the ready list once. It
// reports whether work may be left: a full batch, or a ready list.
func (l *evLoop) turn() bool {
	n, err := rawEpollWait(l.epfd, l.events)
	if err == unix.EINTR {
		return true
	}
	if err != nil {
		l.err = os.NewSyscallError("epoll_wait", err)
		return false
	}
	for i := range l.events[:n] {
		l.handle(&l.events[i])
	}
	if len(l.ready) > 0 {
		l.serveReady()
	}
	return n == len(l.events) || len(l.ready) > 0
}

// yield puts c on the ready list: it stopped with work left.
func (l *evLoop) yield(c *evConn) {
	if !c.queued {
		c.queued = true
		l.ready = append(l.ready, evReady{c: c})
	}
}

// serveReady serves the listeners and connections that were on the
// ready list when it began; those that yield again wait for the next
// turn, after the events that came meanwhile.
func (l *evLoop) serveReady() {
	todo := l.ready
	l.ready = l.spare[:0]
	for i := range todo {
		r := todo[i]
		todo[i] = evReady{}
		if r.ln != nil {
			r.ln.queued = false
			if l.lns[r.ln.f] == r.ln {
				l.accept(r.ln)
			}
			continue
		}
		r.c.queued = false
		if r.c.state == connOpen {
			l.pump(r.c, 0)
			l.pump(r.c, 1)
		}
	}
	l.spare = todo[:0]
}

func (l *evLoop) handle(ev *unix.EpollEvent) {
	idx, gen := uint32(ev.Fd), uint32(ev.Pad)
	if idx == wakeIdx {
		l.runPosted()
		return
	}
	s := &l.slots[idx]
	if s.gen != gen {
		return // for a socket closed earlier in this batch
	}
	if s.l != nil {
		l.accept(s.l)
		return
	}
	c, side := s.c, 0
	if s.up {
		side = 1
	}
	bad := ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0
	if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP) != 0 || bad {
		c.rd[side] = true
	}
	if ev.Events&unix.EPOLLRDHUP != 0 || bad {
		c.hup[side] = true
	}
	if ev.Events&unix.EPOLLOUT != 0 || bad {
		c.wr[side] = true
	}
	switch c.state {
	case connConnecting:
		if side == 1 {
			l.connectDone(c, ev.Events)
		}
	case connOpen:
		l.pump(c, side)
		l.pump(c, 1-side)
	}
}

// listenControl sets TCP_NODELAY on a listening socket before it listens:
// accepted sockets inherit it, which saves the loop a system call per
// connection.
func listenControl(network, address string, c syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" && network != "tcp" {
		return nil
	}
	return c.Control(func(fd uintptr) { rawSetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) })
}

// addListener starts accepting f's connections.
func (l *evLoop) addListener(f *frontend, exclusive bool) {
	l.post(func() {
		rc, err := f.ln.(*net.TCPListener).SyscallConn()
		if err != nil {
			return
		}
		ln := &evListener{f: f, rc: rc, idx: l.slot()}
		l.slots[ln.idx].l = ln
		events := uint32(unix.EPOLLIN)
		if exclusive {
			events |= unix.EPOLLEXCLUSIVE
		}
		var aerr error
		if err := rc.Control(func(fd uintptr) {
			aerr = l.add(int(fd), ln.idx, events)
			if errors.Is(aerr, unix.EINVAL) && exclusive {
				// Before Linux 4.5: every loop wakes, one accepts.
				aerr = l.add(int(fd), ln.idx, unix.EPOLLIN)
			}
		}); err != nil || aerr != nil {
			klog.ErrorS(errors.Join(err, aerr), "Cannot watch listener", "frontend", f.key.addr)
			l.release(ln.idx)
			return
		}
		l.lns[f] = ln
		// Connections queued before the socket was added raise no edge.
		l.accept(ln)
	})
}

// removeListener forgets f, whose listener is closed (which took it out
// of the epoll set).
func (l *evLoop) removeListener(f *frontend) {
	l.post(func() {
		if ln, ok := l.lns[f]; ok {
			delete(l.lns, f)
			l.release(ln.idx)
		}
	})
}
