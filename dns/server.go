package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/dns/answer"
	"portal.dev/portal/dns/forward"
	"portal.dev/portal/dns/index"
)

// Server is the cluster DNS server.
type Server struct {
	o         Options
	idx       *index.Index
	ans       *answer.Answerer
	fwd       *forward.Forwarder
	upstreams []string
	factory   informers.SharedInformerFactory
	synced    []cache.InformerSynced
	ready     atomic.Bool
	metrics   *metrics
	reg       *prometheus.Registry

	// Set by listen.
	udpConns  []*net.UDPConn
	tcpLns    []net.Listener
	port      int
	listening chan struct{}
	fwdSem    chan struct{}
}

// New builds a server that reads the cluster through client. Nothing
// starts before Run.
func New(client kubernetes.Interface, o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	mode, _ := podMode(o.Pods)
	s := &Server{o: o, idx: &index.Index{}, listening: make(chan struct{}), fwdSem: make(chan struct{}, 512)}
	var nsAddrs []netip.Addr
	for _, a := range o.BindAddresses {
		if ip := netip.MustParseAddr(a); !ip.IsUnspecified() {
			nsAddrs = append(nsAddrs, ip)
		}
	}
	s.ans = answer.New(answer.Config{Zone: o.ClusterDomain, TTL: o.ttlSeconds(), Pods: mode, NSAddrs: nsAddrs}, s.idx)
	if client != nil {
		s.setupInformers(client, mode == answer.PodsVerified)
	}
	return s, nil
}

// Ready reports whether every informer has synced, so that answers are
// complete; until then cluster names get SERVFAIL.
func (s *Server) Ready() bool { return s.ready.Load() }

// Registry is the server's own Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Run serves until ctx ends, then stops every goroutine it started and
// returns. It fails at once when a listener cannot be opened.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.listen(); err != nil {
		return err
	}
	if err := s.setupForwarder(); err != nil {
		s.closeListeners()
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if err := s.serveHTTP(ctx, &wg); err != nil {
		s.closeListeners()
		return err
	}
	if s.factory != nil {
		s.factory.Start(ctx.Done())
		defer s.factory.Shutdown()
		wg.Go(func() { s.waitSynced(ctx) })
	} else {
		s.markReady()
	}
	for _, c := range s.udpConns {
		wg.Go(func() { s.serveUDP(ctx, c, &wg) })
	}
	var tcpServers []*dns.Server
	for _, l := range s.tcpLns {
		srv := &dns.Server{Listener: l, Net: "tcp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			s.serveTCP(ctx, w, r)
		})}
		tcpServers = append(tcpServers, srv)
		wg.Go(func() {
			if err := srv.ActivateAndServe(); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "DNS TCP listener stopped", "address", l.Addr().String())
			}
		})
	}
	klog.InfoS("DNS serving", "addresses", s.o.BindAddresses, "port", s.port, "zone", s.ans.Zone(), "upstreams", s.upstreams,
		"udpSockets", len(s.udpConns))
	close(s.listening)
	<-ctx.Done()
	s.closeListeners()
	for _, srv := range tcpServers {
		sctx, c := context.WithTimeout(context.Background(), time.Second)
		srv.ShutdownContext(sctx)
		c()
	}
	return nil
}

// waitSynced marks the server ready once every informer has synced and
// its handlers have seen the initial list.
func (s *Server) waitSynced(ctx context.Context) {
	if cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		s.markReady()
		st := s.idx.Stats()
		klog.InfoS("DNS informers synced", "services", st.Services, "endpointSlices", st.EndpointSlices, "namespaces", st.Namespaces)
	}
}

// markReady is for servers without informers (tests feeding the index).
func (s *Server) markReady() {
	s.ready.Store(true)
	s.idx.Bump()
}

func (s *Server) setupForwarder() error {
	ups, err := s.o.resolveUpstreams(s.port)
	if err != nil {
		return err
	}
	var locals []net.IP
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				locals = append(locals, n.IP)
			}
		}
	}
	for _, u := range ups {
		if forward.IsLocal(u, s.o.BindAddresses, s.port, locals) {
			klog.InfoS("Not forwarding to this server itself", "upstream", u)
			continue
		}
		s.upstreams = append(s.upstreams, u)
	}
	if len(s.upstreams) == 0 {
		klog.InfoS("No upstream servers: names outside the cluster zone get REFUSED")
	}
	cacheSize := s.o.CacheSize
	if cacheSize < 0 {
		cacheSize = 0
	}
	s.fwd = forward.New(forward.Options{Upstreams: s.upstreams, CacheSize: cacheSize})
	s.metrics = newMetrics(fmt.Sprintf("dns://:%d", s.port), s.fwd, s.upstreams)
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(s.metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return nil
}

// listen opens the UDP sockets (several per address with SO_REUSEPORT,
// one per CPU, where the platform has it) and the TCP listeners. Port 0
// takes the port the kernel gives the first UDP socket; when another
// process holds that port for TCP, another port is tried.
func (s *Server) listen() error {
	for range 10 {
		err := s.listenOn(s.o.Port)
		if s.o.Port != 0 || !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
	}
	return s.listenOn(s.o.Port)
}

func (s *Server) listenOn(port int) error {
	s.udpConns, s.tcpLns = nil, nil
	n := runtime.GOMAXPROCS(0)
	for _, a := range s.o.BindAddresses {
		for i := range n {
			c, err := listenUDP(a, port, n > 1)
			if err != nil {
				if i > 0 {
					break // the platform has no SO_REUSEPORT: one socket it is
				}
				s.closeListeners()
				return fmt.Errorf("--dns-bind-address %s: %w", a, err)
			}
			if port == 0 {
				port = c.LocalAddr().(*net.UDPAddr).Port
			}
			s.udpConns = append(s.udpConns, c)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(a, fmt.Sprint(port)))
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("--dns-bind-address %s: %w", a, err)
		}
		s.tcpLns = append(s.tcpLns, l)
	}
	s.port = port
	return nil
}

func (s *Server) closeListeners() {
	for _, c := range s.udpConns {
		c.Close()
	}
	for _, l := range s.tcpLns {
		l.Close()
	}
}

// outcome is how a query was answered.
type outcome struct {
	resp      *dns.Msg
	plugin    int
	cacheable bool // a packed copy may be reused until the index changes
}

// local answers what the server answers itself: errors, the cluster zone,
// and reverse names of cluster addresses. ok is false when req belongs to
// the upstreams.
func (s *Server) local(req *dns.Msg) (out outcome, ok bool) {
	reply := func(rcode int) (outcome, bool) {
		m := new(dns.Msg)
		m.SetRcode(req, rcode)
		return outcome{resp: m, plugin: pluginNone, cacheable: true}, true
	}
	if req.Response {
		return outcome{}, true // nil resp: drop
	}
	if req.Opcode != dns.OpcodeQuery {
		return reply(dns.RcodeNotImplemented)
	}
	if len(req.Question) != 1 {
		return reply(dns.RcodeFormatError)
	}
	if o := req.IsEdns0(); o != nil && o.Version() != 0 {
		return reply(dns.RcodeBadVers)
	}
	q := req.Question[0]
	if q.Qclass != dns.ClassINET {
		return reply(dns.RcodeRefused)
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		return reply(dns.RcodeRefused) // no zone transfers, as CoreDNS's kubernetes plugin
	}
	lname := strings.ToLower(q.Name)
	ours := s.ans.InZone(lname)
	if !ours && q.Qtype == dns.TypePTR {
		_, ours = answer.ReverseAddr(lname)
	}
	if ours && !s.Ready() {
		// Never a wrong NXDOMAIN: until the informers have synced the
		// index may lack the name.
		o, _ := reply(dns.RcodeServerFailure)
		o.cacheable = false
		return o, true
	}
	m := new(dns.Msg)
	m.SetReply(req)
	if !s.ans.Answer(m, q) {
		return outcome{}, false
	}
	return outcome{resp: m, plugin: pluginKubernetes, cacheable: true}, true
}

// forward answers req from the upstreams: REFUSED without any, SERVFAIL
// when none answers.
func (s *Server) forward(ctx context.Context, req *dns.Msg) outcome {
	m, err := s.fwd.Forward(ctx, req)
	if err == nil {
		return outcome{resp: m, plugin: pluginForward}
	}
	m = new(dns.Msg)
	if errors.Is(err, forward.ErrNoUpstream) {
		m.SetRcode(req, dns.RcodeRefused)
	} else {
		klog.V(2).InfoS("Forwarding failed", "name", req.Question[0].Name, "err", err)
		m.SetRcode(req, dns.RcodeServerFailure)
	}
	return outcome{resp: m, plugin: pluginNone}
}

// finalize fits resp to its client: EDNS echoed (RFC 6891), compression on,
// truncated with TC set to the client's size over UDP.
func finalize(resp, req *dns.Msg, udp bool) {
	resp.Compress = true
	size := dns.MaxMsgSize
	if o := req.IsEdns0(); o != nil {
		if resp.IsEdns0() == nil {
			resp.SetEdns0(maxUDPSize, o.Do())
		} else {
			resp.IsEdns0().SetUDPSize(maxUDPSize)
		}
		if udp {
			size = int(min(max(o.UDPSize(), dns.MinMsgSize), maxUDPSize))
		}
	} else {
		// No OPT in the query: none in the reply (an upstream's own goes).
		extra := resp.Extra[:0]
		for _, rr := range resp.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				extra = append(extra, rr)
			}
		}
		resp.Extra = extra
		if udp {
			size = dns.MinMsgSize
		}
	}
	if resp.Len() > size {
		resp.Truncate(size)
	}
}

// serveTCP answers one message on a TCP connection (miekg/dns runs the
// connection; TCP is not the hot path).
func (s *Server) serveTCP(ctx context.Context, w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	out, ok := s.local(req)
	if !ok {
		out = s.forward(ctx, req)
	}
	if out.resp == nil {
		return
	}
	finalize(out.resp, req, false)
	w.WriteMsg(out.resp)
	s.observe(protoTCP, familyOf(w.RemoteAddr()), req, out, time.Since(start))
}

func (s *Server) observe(proto, fam int, req *dns.Msg, out outcome, d time.Duration) {
	var qtype uint16
	if len(req.Question) > 0 {
		qtype = req.Question[0].Qtype
	}
	s.metrics.observe(proto, fam, qtype, out.resp.Rcode, out.plugin, d)
}

func familyOf(a net.Addr) int {
	if u, ok := a.(*net.TCPAddr); ok && u.IP.To4() == nil {
		return famIPv6
	}
	if u, ok := a.(*net.UDPAddr); ok && u.IP.To4() == nil {
		return famIPv6
	}
	return famIPv4
}

const maxUDPSize = 1232
