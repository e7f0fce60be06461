package userspace

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// frontend is one listening socket and the route its traffic takes.
type frontend struct {
	p     *Proxier
	key   frontendKey
	route atomic.Pointer[route]
	ln    net.Listener
	pc    *net.UDPConn
	loops []*evLoop // that accept from ln; none: serveTCP does

	mu    sync.Mutex
	flows map[netip.AddrPort]*flow
}

func (p *Proxier) open(k frontendKey, r *route) (*frontend, error) {
	f := &frontend{p: p, key: k, flows: map[netip.AddrPort]*flow{}}
	f.route.Store(r)
	network := "tcp4"
	if k.addr.Addr().Is6() {
		network = "tcp6"
	}
	addr := k.addr.String()
	if k.proto == v1.ProtocolUDP {
		network = "udp" + network[3:]
		pc, err := p.cfg.ListenPacket(network, addr)
		if err != nil {
			return nil, err
		}
		udp, ok := pc.(*net.UDPConn)
		if !ok {
			pc.Close()
			return nil, errors.New("not a UDP socket")
		}
		f.pc = udp
		p.wg.Add(1)
		go f.serveUDP()
		return f, nil
	}
	ln, err := p.cfg.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	f.ln = ln
	if _, ok := ln.(*net.TCPListener); ok {
		f.loops = p.tcpLoops()
	}
	for _, l := range f.loops {
		l.addListener(f, len(f.loops) > 1)
	}
	if len(f.loops) == 0 {
		p.wg.Add(1)
		go f.serveTCP()
	}
	return f, nil
}

// close stops the socket. TCP connections it accepted go on (they drain
// with their backend); UDP flows end with the socket their replies use.
func (f *frontend) close() {
	if f.ln != nil {
		f.ln.Close()
		for _, l := range f.loops {
			l.removeListener(f)
		}
	}
	if f.pc != nil {
		f.pc.Close()
		f.mu.Lock()
		flows := make([]*flow, 0, len(f.flows))
		for _, fl := range f.flows {
			flows = append(flows, fl)
		}
		f.mu.Unlock()
		for _, fl := range flows {
			fl.Close()
		}
	}
}

func addrPortOf(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UDPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

func (f *frontend) serveTCP() {
	defer f.p.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			klog.V(2).InfoS("Accept failed", "frontend", f.key.addr, "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		f.p.workers.run(func() { f.handleTCP(c) })
	}
}

// handleTCP connects c to an endpoint, trying the next one when a
// connect fails, so a dead endpoint costs the client nothing but time.
func (f *frontend) handleTCP(c net.Conn) {
	r := f.route.Load()
	client := addrPortOf(c.RemoteAddr())
	if !r.allowed(client.Addr()) {
		r.sp.deniedCounter().Inc()
		resetClose(c)
		return
	}
	conn := Conn{Client: client, Frontend: addrPortOf(c.LocalAddr())}
	var tried []bool
	triedFn := func(i int) bool { return tried != nil && tried[i] }
	for range r.backends {
		var i int
		if tried == nil {
			i = r.pick(conn, nil, time.Now())
		} else {
			i = r.pick(conn, triedFn, time.Now())
		}
		if i < 0 {
			break
		}
		b := r.backends[i]
		up, err := f.p.cfg.Dial(f.p.ctx, "tcp", b.name)
		if err != nil {
			b.stats().failures.Inc()
			klog.V(3).InfoS("Connect to endpoint failed; trying the next", "endpoint", b.name, "err", err)
			if tried == nil {
				tried = make([]bool, len(r.backends))
			}
			tried[i] = true
			continue
		}
		if !f.p.splice(c, up, b, func() { r.remember(client.Addr(), b, time.Now()) }) {
			// The endpoint left during the connect: as a failed
			// connect, the client goes to the next one.
			up.Close()
			if tried == nil {
				tried = make([]bool, len(r.backends))
			}
			tried[i] = true
			continue
		}
		return
	}
	resetClose(c)
}

// resetClose closes c with a reset, so the client fails at once.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// pair is a proxied TCP connection; closing it closes both sides.
type pair struct {
	client, up net.Conn
	once       sync.Once
	ended      atomic.Int32 // directions that reached EOF
}

func (p *pair) Close() error {
	p.once.Do(func() {
		p.client.Close()
		p.up.Close()
	})
	return nil
}

func (p *pair) drains() bool { return true }

// splice copies both ways until both sides have finished. io.Copy between
// two *net.TCPConn uses splice(2), so the bytes never enter user space.
// A FIN from one side is passed on as a FIN (half-close); an error on
// either side closes both. It returns false, having done nothing, when b
// is gone; tracked runs once the connection counts as b's.
func (p *Proxier) splice(client, up net.Conn, b *backend, tracked func()) bool {
	pr := &pair{client: client, up: up}
	if !b.track(pr) {
		return false
	}
	tracked()
	m := b.stats()
	b.active.Add(1)
	m.conns.Inc()
	m.active.Inc()
	defer func() {
		pr.Close()
		b.active.Add(-1)
		m.active.Dec()
		b.untrack(pr) // last: it may delete the series
	}()
	var wg sync.WaitGroup
	var toEndpoint int64
	wg.Add(1)
	p.workers.run(func() {
		defer wg.Done()
		toEndpoint = copyHalf(up, client, pr)
	})
	toClient := copyHalf(client, up, pr)
	wg.Wait()
	m.toEndpoint.Add(float64(toEndpoint))
	m.toClient.Add(float64(toClient))
	return true
}

type closeWriter interface{ CloseWrite() error }

func copyHalf(dst, src net.Conn, pr *pair) int64 {
	var n int64
	var err error
	d, dok := dst.(*net.TCPConn)
	s, sok := src.(*net.TCPConn)
	if dok && sok {
		n, err = copyTCP(d, s)
	} else {
		n, err = io.Copy(dst, src)
	}
	if err != nil {
		pr.Close()
		return n
	}
	// The first direction to end passes its FIN on. When the second
	// ends, both sockets are read to their end and are closed at once;
	// close(2) sends the FIN itself, so a shutdown(2) would be one more
	// system call (and one more trip through the loopback) for nothing.
	if pr.ended.Add(1) == 1 {
		if cw, ok := dst.(closeWriter); ok {
			cw.CloseWrite()
		}
	}
	return n
}

// copyBufSize is the buffer of copyTCP's small reads; a read that fills
// it marks a bulk transfer.
const copyBufSize = 16 << 10

// errBulk ends copySmall when a read filled its buffer.
var errBulk = errors.New("bulk transfer")

// copyTCP copies src to dst until src's EOF. Requests and answers of a
// few kilobytes go through read(2) and write(2) with a pooled buffer;
// splice(2) through a pipe costs more system time per message than
// copying a kilobyte. When a read fills the buffer, the stream is bulk
// and the rest is spliced (io.Copy between *net.TCPConn), where not
// copying the bytes wins.
func copyTCP(dst, src *net.TCPConn) (int64, error) {
	n, err := copySmall(dst, src)
	if err != errBulk {
		return n, err
	}
	m, err := dst.ReadFrom(src)
	return n + m, err
}

// flow is one UDP client's traffic through a frontend: a connected socket
// to its endpoint, whose replies go back from the frontend's socket.
type flow struct {
	f      *frontend
	b      *backend
	client netip.AddrPort
	up     *net.UDPConn
	last   atomic.Int64 // unix nanos of the last datagram either way
	once   sync.Once
}

func (fl *flow) Close() error {
	fl.once.Do(func() {
		fl.up.Close()
		fl.f.mu.Lock()
		if fl.f.flows[fl.client] == fl {
			delete(fl.f.flows, fl.client)
		}
		fl.f.mu.Unlock()
		fl.b.active.Add(-1)
		fl.b.stats().active.Dec()
		fl.b.untrack(fl) // last: it may delete the series
	})
	return nil
}

func (f *frontend) serveUDP() {
	defer f.p.wg.Done()
	buf := make([]byte, 64*1024)
	for {
		n, src, err := f.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		f.mu.Lock()
		fl := f.flows[src]
		f.mu.Unlock()
		if fl == nil {
			if fl = f.newFlow(src); fl == nil {
				continue
			}
		}
		fl.last.Store(time.Now().UnixNano())
		if _, err := fl.up.Write(buf[:n]); err == nil {
			fl.b.stats().toEndpoint.Add(float64(n))
		}
	}
}

func (f *frontend) newFlow(client netip.AddrPort) *flow {
	r := f.route.Load()
	if !r.allowed(client.Addr()) {
		r.sp.deniedCounter().Inc()
		return nil
	}
	conn := Conn{Client: client, Frontend: f.key.addr}
	tried := make([]bool, len(r.backends))
	for range r.backends {
		i := r.pick(conn, func(i int) bool { return tried[i] }, time.Now())
		if i < 0 {
			return nil
		}
		b := r.backends[i]
		up, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(b.addr))
		if err != nil {
			b.stats().failures.Inc()
			tried[i] = true
			continue
		}
		fl := &flow{f: f, b: b, client: client, up: up}
		if !b.track(fl) {
			up.Close()
			tried[i] = true
			continue
		}
		r.remember(client.Addr(), b, time.Now())
		b.active.Add(1)
		b.stats().conns.Inc()
		b.stats().active.Inc()
		f.mu.Lock()
		f.flows[client] = fl
		f.mu.Unlock()
		f.p.wg.Add(1)
		go fl.replies()
		return fl
	}
	return nil
}

// replies sends the endpoint's datagrams back to the client from the
// frontend's socket, so the client sees the address it sent to; the
// flow ends after UDPIdleTimeout without traffic.
func (fl *flow) replies() {
	defer fl.f.p.wg.Done()
	defer fl.Close()
	idle := fl.f.p.cfg.UDPIdleTimeout
	buf := make([]byte, 64*1024)
	toClient := fl.b.stats().toClient
	for {
		fl.up.SetReadDeadline(time.Now().Add(idle))
		n, err := fl.up.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, fl.last.Load())) < idle {
				continue
			}
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, net.ErrClosed) {
				return
			}
			// ICMP errors (endpoint port closed) surface here; the
			// client's next datagram tells whether the flow lives on.
			if time.Since(time.Unix(0, fl.last.Load())) >= idle {
				return
			}
			continue
		}
		fl.last.Store(time.Now().UnixNano())
		if _, err := fl.f.pc.WriteToUDPAddrPort(buf[:n], fl.client); err == nil {
			toClient.Add(float64(n))
		}
	}
}
