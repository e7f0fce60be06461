// Package apilb is the client-side load balancer a component that runs apart
// from the API servers puts in front of them, as k3s's agent does: client-go
// takes one server URL, so the component talks to a listener on loopback that
// forwards each TCP connection to one of the known API servers. TLS passes
// through untouched, so the component still verifies the server and the
// server still sees the component's own credential.
//
// The balancer prefers one server and stays on it while it answers; a failed
// dial or health check moves it to the next. Connections forwarded to a
// server that failed its health check (not merely one dial) are closed, so
// a watch on them ends with a connection error and client-go's reflector
// resumes it, from its resourceVersion, through the next server, instead of
// waiting minutes for TCP to give up. A server that answers but is not
// ready (cut from etcd quorum, still starting) loses its connections only
// while another server is ready: when none is, a server that answers is
// still the best there is. The package owns only its listener and the
// connections it forwards; it does not know HTTP beyond what a health check
// asks.
package apilb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Config says where the API servers are and how to judge them.
type Config struct {
	// Servers are the seed servers as host:port, from the component's flags
	// and kubeconfig. They stay in the list whatever discovery finds, so a
	// wrong or empty discovery cannot leave the component without a server.
	Servers []string
	// ListenAddress is where the balancer listens; 127.0.0.1:0 when empty.
	ListenAddress string
	// Check tells whether a server answers; nil dials TCP. An error that
	// wraps ErrNotReady says the server answered but is not ready.
	Check func(ctx context.Context, server string) error
	// CheckInterval is how often every server is checked; 2 s when zero.
	CheckInterval time.Duration
	// DialTimeout bounds a dial and a check; 5 s when zero.
	DialTimeout time.Duration
	// Dial opens a connection to a server; a net.Dialer with TCP
	// keep-alive when nil.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// ErrNotReady is what a Check wraps when the server answered but said it is
// not ready to serve.
var ErrNotReady = errors.New("not ready")

// Balancer forwards connections from its loopback listener to the API
// server it prefers.
type Balancer struct {
	cfg      Config
	listener net.Listener

	mu         sync.Mutex
	seeds      []string
	discovered []string
	servers    []string // seeds and discovered, in order of preference after current
	current    string
	down       map[string]bool
	conns      map[string]map[pairConn]struct{} // by server, the connections forwarded to it
	stopped    bool                             // Run is returning: forward nothing more
}

// New listens on loopback; Run serves.
func New(cfg Config) (*Balancer, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("apilb: no API server given")
	}
	if cfg.ListenAddress == "" {
		cfg.ListenAddress = "127.0.0.1:0"
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = 2 * time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Dial == nil {
		d := &net.Dialer{KeepAlive: 10 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Check == nil {
		cfg.Check = func(ctx context.Context, server string) error {
			c, err := cfg.Dial(ctx, "tcp", server)
			if err == nil {
				c.Close()
			}
			return err
		}
	}
	l, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("apilb: listen: %w", err)
	}
	b := &Balancer{cfg: cfg, listener: l, down: map[string]bool{}, conns: map[string]map[pairConn]struct{}{}}
	b.seeds = dedup(cfg.Servers)
	b.servers = b.seeds
	b.current = b.seeds[0]
	return b, nil
}

// Addr is the address the component's client connects to.
func (b *Balancer) Addr() string { return b.listener.Addr().String() }

// Current is the server new connections go to first.
func (b *Balancer) Current() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.current
}

// Servers lists the known servers: the seeds and the discovered ones.
func (b *Balancer) Servers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.servers)
}

// SetServers replaces the discovered servers. Connections to a server that
// is neither discovered nor a seed any more are closed: it left the
// kubernetes Service because it stopped renewing its lease or shut down.
func (b *Balancer) SetServers(discovered []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.discovered = dedup(discovered)
	all := dedup(append(slices.Clone(b.discovered), b.seeds...))
	if slices.Equal(all, b.servers) {
		return
	}
	klog.InfoS("API servers changed", "servers", all)
	for _, s := range b.servers {
		if !slices.Contains(all, s) {
			delete(b.down, s)
			b.closeConnsLocked(s)
		}
	}
	b.servers = all
	if !slices.Contains(all, b.current) {
		b.pickLocked()
	}
}

// Run accepts and forwards connections, and checks the servers, until ctx
// ends; then it closes the listener and every forwarded connection. A
// failed accept is retried after a back-off; Run ends early only if the
// listener is closed under it.
func (b *Balancer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		b.listener.Close()
		b.mu.Lock()
		b.stopped = true
		for s := range b.conns {
			b.closeConnsLocked(s)
		}
		b.mu.Unlock()
	}()
	go func() {
		defer wg.Done()
		b.checkLoop(ctx)
	}()
	var backoff time.Duration
	for {
		c, err := b.listener.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("apilb: accept: %w", err)
			}
			// Running out of file descriptors or a connection aborted
			// before it was accepted passes; back off and accept again,
			// as net/http's server does, rather than leave the component
			// with no way to the API.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			klog.ErrorS(err, "API load balancer could not accept a connection; retrying", "delay", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.forward(ctx, c)
		}()
	}
}

// order is the sequence in which a new connection tries the servers: the
// current one, then those not known to be down, then the rest, so that a
// connection still gets through when every check failed.
func (b *Balancer) order() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	up := []string{b.current}
	var down []string
	for _, s := range b.servers {
		switch {
		case s == b.current:
		case b.down[s]:
			down = append(down, s)
		default:
			up = append(up, s)
		}
	}
	return append(up, down...)
}

func (b *Balancer) forward(ctx context.Context, client net.Conn) {
	var server net.Conn
	var to string
	for _, s := range b.order() {
		dctx, cancel := context.WithTimeout(ctx, b.cfg.DialTimeout)
		c, err := b.cfg.Dial(dctx, "tcp", s)
		cancel()
		if err == nil {
			server, to = c, s
			break
		}
		if ctx.Err() != nil {
			break
		}
		// One failed dial (a full SYN backlog, a hiccup) says little about
		// the connections already open to s: steer new connections away
		// and leave those to the health check.
		klog.V(2).InfoS("API server did not answer a dial", "server", s, "err", err)
		b.markDown(s, false)
	}
	if server == nil {
		client.Close()
		return
	}
	pair := pairConn{client, server}
	if !b.track(to, pair) {
		pair.Close()
		return
	}
	defer b.untrack(to, pair)
	done := make(chan struct{}, 2)
	go func() { io.Copy(server, client); closeWrite(server); done <- struct{}{} }()
	go func() { io.Copy(client, server); closeWrite(client); done <- struct{}{} }()
	<-done
	<-done
	client.Close()
	server.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// pairConn closes the server side with the client side, so closing what
// conns holds ends both copies.
type pairConn struct {
	net.Conn
	server net.Conn
}

func (p pairConn) Close() error {
	p.server.Close()
	return p.Conn.Close()
}

func (b *Balancer) track(server string, pair pairConn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || !slices.Contains(b.servers, server) {
		return false
	}
	if b.conns[server] == nil {
		b.conns[server] = map[pairConn]struct{}{}
	}
	b.conns[server][pair] = struct{}{}
	b.down[server] = false
	if b.down[b.current] || !slices.Contains(b.servers, b.current) {
		b.current = server
	}
	return true
}

func (b *Balancer) untrack(server string, pair pairConn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns[server], pair)
}

// markDown records that server failed, closes what was forwarded to it when
// closeConns is set and, if it was the current server, moves on to the next.
func (b *Balancer) markDown(server string, closeConns bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.servers, server) {
		return
	}
	if !b.down[server] {
		klog.InfoS("API server is down", "server", server, "closingConnections", closeConns, "connections", len(b.conns[server]))
		b.down[server] = true
		if server == b.current {
			b.pickLocked()
		}
	}
	if closeConns {
		b.closeConnsLocked(server)
	}
}

func (b *Balancer) markUp(server string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.down[server] {
		return
	}
	klog.InfoS("API server answers again", "server", server)
	b.down[server] = false
	if b.down[b.current] {
		b.current = server
	}
}

// pickLocked makes the first server not known to be down the current one;
// when all are down it keeps the first, so dials keep trying.
func (b *Balancer) pickLocked() {
	prev := b.current
	b.current = b.servers[0]
	for _, s := range b.servers {
		if !b.down[s] {
			b.current = s
			break
		}
	}
	if b.current != prev {
		klog.InfoS("Switched API server", "from", prev, "to", b.current)
	}
}

func (b *Balancer) closeConnsLocked(server string) {
	for c := range b.conns[server] {
		c.Close()
	}
	delete(b.conns, server)
}

func (b *Balancer) checkLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.CheckInterval)
	defer t.Stop()
	for {
		b.checkAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkAll checks every server at once and records the results. A server
// that cannot be reached loses its connections at once; one that is not
// ready loses them only when another server is ready to take them.
func (b *Balancer) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range b.Servers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, b.cfg.DialTimeout)
			err := b.cfg.Check(cctx, s)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				klog.V(2).InfoS("API server failed its health check", "server", s, "err", err)
				b.markDown(s, !errors.Is(err, ErrNotReady))
				return
			}
			b.markUp(s)
		}()
	}
	wg.Wait()
	if ctx.Err() == nil {
		b.leaveDownServers()
	}
}

// leaveDownServers closes the connections forwarded to servers that are
// down, when at least one server is up to take them.
func (b *Balancer) leaveDownServers() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.ContainsFunc(b.servers, func(s string) bool { return !b.down[s] }) {
		return
	}
	for _, s := range b.servers {
		if b.down[s] && len(b.conns[s]) > 0 {
			klog.InfoS("Moving connections off an API server that is down", "server", s, "connections", len(b.conns[s]))
			b.closeConnsLocked(s)
		}
	}
}

func dedup(in []string) []string {
	var out []string
	for _, s := range in {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
