package ingress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Limits of the client side, against slow and oversized requests.
const (
	// readHeaderTimeout bounds the time a client takes to send its
	// request headers (slowloris), as nginx's client_header_timeout.
	readHeaderTimeout = 60 * time.Second
	// idleTimeout closes a client's keep-alive connection idle that long,
	// nginx's keepalive_timeout is 75s.
	idleTimeout = 75 * time.Second
	// maxHeaderBytes is the most request header a client may send; more
	// is answered 431. nginx allows 4 buffers of 8k.
	maxHeaderBytes = 32 << 10
)

// BindError is the error of a port that could not be listened on.
type BindError struct {
	Flag string // --http-port or --https-port
	Addr string
	Err  error
}

func (e *BindError) Error() string {
	return fmt.Sprintf("listen on %s (%s): %v", e.Addr, e.Flag, e.Err)
}

func (e *BindError) Unwrap() error { return e.Err }

// shutdownGrace is how long requests in flight, upgraded connections
// (WebSockets) among them, may go on once the servers are told to stop.
const shutdownGrace = 5 * time.Second

// Servers are the plain-HTTP and TLS servers of the handler, bound.
// Connections are served by Portal's own HTTP/1.1 loop (h1Conn) and
// handed to each listener's net/http server for what the loop does not
// serve.
type Servers struct {
	listeners []*servedListener
	// grace is shutdownGrace, shorter in tests.
	grace time.Duration

	// base is the context of every request; it ends after the grace,
	// which ends upgraded connections: the servers' Shutdown does not
	// know them once hijacked.
	base       context.Context
	cancelBase context.CancelFunc
	// handlers counts the handlers running and the loop's connections,
	// so that Serve returns only after the last. Not a WaitGroup: a
	// request may still begin on an HTTP/2 connection while Serve waits.
	handlers running

	// closing is set once the servers are told to stop.
	closing atomic.Bool
	mu      sync.Mutex
	// conns are the loop's connections, by the connection accepted.
	conns map[*h1Conn]struct{}
	// workers serve the accepted connections.
	workers workers
}

// servedListener is one bound port: its listener, the handler of its
// requests, and the net/http server of the connections handed over.
type servedListener struct {
	ln      net.Listener
	tlsConf *tls.Config // nil for plain HTTP
	handler *listenerHandler
	srv     *http.Server
	handoff *handOffListener
	// handedOff counts the connections given to srv.
	handedOff atomic.Int64
}

// Listen binds --http-port and --https-port (a zero port is not served)
// and makes their servers; certificates come from routes, then from
// defaultCert, then from one generated now. A port that cannot be bound
// is a *BindError.
func Listen(o Options, h *Handler, routes func() Routes, defaultCert func() *tls.Certificate) (*Servers, error) {
	generated, err := selfSigned()
	if err != nil {
		return nil, err
	}
	s := &Servers{}
	for _, l := range []struct {
		flag    string
		port    int
		overTLS bool
	}{{"--http-port", o.HTTPPort, false}, {"--https-port", o.HTTPSPort, true}} {
		if l.port == 0 {
			continue
		}
		addr := net.JoinHostPort(o.BindAddress, strconv.Itoa(l.port))
		// No TCP keep-alive probes from the start (Go's default, set up
		// with four system calls per accepted connection, which a client
		// that connects for each request pays each time): the server's
		// timeouts end HTTP/1.1 connections whose client is gone, as
		// nginx does without so_keepalive. Connections no timeout bounds
		// get probes when they turn out to be such (clientConn.probe).
		lc := net.ListenConfig{KeepAlive: -1, Control: deferAccept}
		ln, err := lc.Listen(context.Background(), "tcp", addr)
		if err != nil {
			s.close()
			return nil, &BindError{Flag: l.flag, Addr: addr, Err: err}
		}
		var tlsConf *tls.Config
		if l.overTLS {
			tlsConf = tlsConfig(routes, defaultCert, generated)
		}
		s.add(ln, h, tlsConf)
	}
	return s, nil
}

// add serves h on ln, over TLS when tlsConf is set.
func (s *Servers) add(ln net.Listener, h *Handler, tlsConf *tls.Config) {
	if s.base == nil {
		s.base, s.cancelBase = context.WithCancel(context.Background())
	}
	handler := &listenerHandler{Handler: h, overTLS: tlsConf != nil, port: strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.handlers.add(1)
			defer s.handlers.add(-1)
			if r.TLS == nil {
				// A connection the loop handed over is not a *tls.Conn
				// to the server, which then leaves the request's TLS out.
				if c, ok := r.Context().Value(clientConnKey{}).(*clientConn); ok {
					r.TLS = c.tls
				}
			}
			handler.ServeHTTP(w, r)
		}),
		BaseContext: func(net.Listener) context.Context { return s.base },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			cc := &clientConn{conn: c}
			if rc, ok := c.(*replayConn); ok {
				if tc, ok := rc.Conn.(*tls.Conn); ok {
					st := tc.ConnectionState()
					cc.tls = &st
				}
			}
			return context.WithValue(ctx, clientConnKey{}, cc)
		},
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// Malformed requests and the TLS handshakes of scanners are the
		// clients' problem, not lines in the controller's log.
		ErrorLog:  log.New(io.Discard, "", 0),
		Protocols: new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	if tlsConf != nil {
		srv.TLSConfig = tlsConf
		srv.Protocols.SetHTTP2(true)
	} else {
		// gRPC clients without TLS speak HTTP/2 from the first byte.
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	s.listeners = append(s.listeners, &servedListener{ln: ln, tlsConf: tlsConf, handler: handler,
		srv: srv, handoff: newHandOffListener(ln.Addr())})
}

// Addrs are the bound addresses, HTTP first.
func (s *Servers) Addrs() []string {
	var a []string
	for _, l := range s.listeners {
		a = append(a, l.ln.Addr().String())
	}
	return a
}

func (s *Servers) close() {
	for _, l := range s.listeners {
		l.ln.Close()
	}
}

// Serve serves until ctx ends, then lets requests in flight finish for a
// few seconds before closing what is left.
func (s *Servers) Serve(ctx context.Context) error {
	errs := make(chan error, 2*len(s.listeners))
	var wg sync.WaitGroup
	for _, l := range s.listeners {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := l.srv.Serve(l.handoff); !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.accept(l); err != nil {
				errs <- err
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	s.shutdown(ctx)
	wg.Wait()
	// The accept loops have returned: no connection is given to a
	// worker after this.
	s.workers.close()
	if err != nil {
		klog.ErrorS(err, "Ingress listener failed")
	}
	return err
}

// shutdown stops the servers, lets requests in flight and upgraded
// connections go on for the grace, then ends them all, and returns once
// every handler has.
func (s *Servers) shutdown(ctx context.Context) {
	grace := s.grace
	if grace == 0 {
		grace = shutdownGrace
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	s.closing.Store(true)
	s.close()
	s.eachConn(func(c *h1Conn) { c.raw.SetReadDeadline(aLongTimeAgo) })
	for _, l := range s.listeners {
		if l.srv.Shutdown(shutdown) != nil {
			l.srv.Close()
		}
		l.handoff.Close()
	}
	select {
	case <-s.handlers.none():
	case <-shutdown.Done():
	}
	if s.cancelBase != nil {
		s.cancelBase()
	}
	s.eachConn(func(c *h1Conn) {
		c.end()
		c.raw.Close()
	})
	<-s.handlers.none()
}

// running counts goroutines at work and tells when there are none.
type running struct {
	mu sync.Mutex
	n  int
	// idle is closed when n drops to 0; made only when asked for while n
	// is above 0, as it is rarely asked and n rises from 0 at many
	// requests.
	idle chan struct{}
}

func (r *running) add(d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n += d
	if r.n == 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
}

// none returns a channel closed when none is running.
func (r *running) none() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	return r.idle
}

// clientConn is a client's connection, in the context of its requests
// under clientConnKey.
type clientConn struct {
	conn net.Conn
	// tls is the state of a TLS connection the loop handed over, for
	// its requests' TLS.
	tls     *tls.ConnectionState
	probing atomic.Bool
}

type clientConnKey struct{}

// probe turns on TCP keep-alive probes, with Go's default timing, for the
// client's connection of r when it may outlive the server's timeouts: an
// upgraded connection (WebSocket) and HTTP/2 streams (gRPC's) have none,
// and probes are then what find a client gone without closing.
func probe(r *http.Request) {
	if r.ProtoMajor != 2 && len(r.Header["Upgrade"]) == 0 {
		return
	}
	c, ok := r.Context().Value(clientConnKey{}).(*clientConn)
	if !ok || !c.probing.CompareAndSwap(false, true) {
		return
	}
	conn := c.conn
	// Under TLS, and under the replay of a connection the loop handed
	// over.
	for {
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = u.NetConn()
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true})
	}
}
