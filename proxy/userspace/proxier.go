// Package userspace is the userspace proxy mode: a layer-4 proxy in Go.
// With root it puts every Service's cluster IPs, externalIPs and load
// balancer VIPs on the portal-vip link and listens on them; NodePorts
// listen on the --nodeport-addresses (all addresses by default). Without
// root (or off Linux) it serves NodePorts only. On Linux, TCP connections
// run in event loops on raw non-blocking sockets (one per GOMAXPROCS,
// evloop_linux.go): small messages are copied through one buffer, bulk
// streams spliced through pipes. Elsewhere, or with injected sockets, each
// connection has goroutines copying between two *net.TCPConn. UDP is
// proxied per client flow. A scheduler (rr, random, lc, sh, dh, sed, nq,
// maglev) picks the endpoint; a failed connect tries the next one; an
// endpoint that leaves drains.
//
// It owns its sockets, the portal-vip link and its metrics, nothing else:
// it must not touch iptables or nftables (the proxy core removes other
// modes' rules), nor any other link. Endpoint selection (readiness,
// traffic policies, topology) is the snapshot package's, as in the kernel
// modes.
package userspace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"portal.dev/portal/proxy/snapshot"
)

// Config configures the userspace mode.
type Config struct {
	// Scheduler is --scheduler, the default scheduler (rr when empty).
	Scheduler string
	// DrainTimeout is --drain-timeout: how long the connections of an
	// endpoint that left may go on before they are closed (0: 30s).
	DrainTimeout time.Duration
	// UDPIdleTimeout closes UDP flows without traffic (0: 30s).
	UDPIdleTimeout time.Duration
	// DialTimeout bounds one connect attempt to an endpoint (0: 2s).
	DialTimeout time.Duration
	// VIPs puts Service addresses on the VIP link; nil serves NodePorts only.
	VIPs VIPs
	// Registerer takes the per-Service and per-endpoint metrics (nil: none).
	Registerer prometheus.Registerer
	// BeforeFirstSync, if set, runs once before the first sync; the proxy
	// uses it to remove the kernel modes' rules.
	BeforeFirstSync func(ctx context.Context) error
	// Listen and ListenPacket open sockets (nil: net's, without TCP
	// keep-alives); tests inject them.
	Listen       func(network, addr string) (net.Listener, error)
	ListenPacket func(network, addr string) (net.PacketConn, error)
	// Dial connects to endpoints (nil: a net.Dialer with DialTimeout,
	// without TCP keep-alives).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (c *Config) defaults() {
	if c.Scheduler == "" {
		c.Scheduler = SchedulerRoundRobin
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.UDPIdleTimeout == 0 {
		c.UDPIdleTimeout = 30 * time.Second
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 2 * time.Second
	}
	// No TCP keep-alive probes on either side, as HAProxy's defaults:
	// turning them on costs four setsockopt(2) calls per socket, eight
	// per proxied connection, and the peers run their own.
	if c.Listen == nil {
		lc := &net.ListenConfig{KeepAlive: -1, Control: listenControl}
		c.Listen = func(network, addr string) (net.Listener, error) {
			return lc.Listen(context.Background(), network, addr)
		}
	}
	if c.ListenPacket == nil {
		c.ListenPacket = net.ListenPacket
	}
	if c.Dial == nil {
		// Not Dialer.DialTCP: with a zero local address it binds the
		// socket to port 0 before connecting, one more system call, and
		// a port chosen without reusing TIME_WAIT ones.
		d := &net.Dialer{Timeout: c.DialTimeout, KeepAlive: -1}
		c.Dial = d.DialContext
	}
}

// Proxier is the userspace proxy. Sync is called from one goroutine; the
// data path runs on goroutines of its own until Close.
type Proxier struct {
	cfg     Config
	metrics *metrics
	started bool

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	workers *workers

	// rawSockets: the sockets are not injected, so TCP may go through
	// the event loops (Linux), started on the first TCP frontend.
	rawSockets bool
	loopOnce   sync.Once
	loops      []*evLoop

	mu        sync.Mutex
	frontends map[frontendKey]*frontend
	ports     map[portKey]*servicePort
	announced map[types.NamespacedName]string // what was logged without VIPs
}

// New returns a userspace Proxier.
func New(cfg Config) *Proxier {
	raw := cfg.Listen == nil && cfg.Dial == nil
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxier{
		cfg: cfg, metrics: newMetrics(cfg.Registerer), ctx: ctx, cancel: cancel,
		frontends: map[frontendKey]*frontend{}, ports: map[portKey]*servicePort{},
		announced: map[types.NamespacedName]string{}, rawSockets: raw,
	}
	p.workers = newWorkers(ctx, &p.wg)
	return p
}

// frontendKey is one socket: a protocol and an address to listen on (the
// unspecified address for NodePorts on all addresses).
type frontendKey struct {
	proto v1.Protocol
	addr  netip.AddrPort
}

// portKey names a Service port across syncs.
type portKey struct {
	svc  types.NamespacedName
	port string
	prot v1.Protocol
}

// route is what a frontend sends connections to; immutable.
type route struct {
	sp       *servicePort
	backends []*backend
	sched    Scheduler
	// ranges, when set, are the only sources allowed (load balancer VIPs
	// with loadBalancerSourceRanges).
	ranges   []netip.Prefix
	affinity time.Duration
	// byFrontend: the scheduler hashes the address the client connected
	// to (dh), which a NodePort on all addresses learns per connection.
	byFrontend bool
}

// Sync makes the sockets and routes match req's snapshot. Userspace syncs
// are cheap and always complete: req.Changed is not needed.
func (p *Proxier) Sync(ctx context.Context, req snapshot.Request) error {
	if !p.started && p.cfg.BeforeFirstSync != nil {
		if err := p.cfg.BeforeFirstSync(ctx); err != nil {
			klog.ErrorS(err, "Could not remove other proxy modes' rules")
		}
	}
	p.started = true
	want, vips := p.plan(req.Snapshot)
	var errs []error
	if p.cfg.VIPs != nil {
		if err := p.cfg.VIPs.Sync(ctx, vips); err != nil {
			errs = append(errs, err)
		}
	} else {
		p.announce(req.Snapshot)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, f := range p.frontends {
		if _, ok := want[k]; !ok {
			f.close()
			delete(p.frontends, k)
		}
	}
	for k, r := range want {
		if f := p.frontends[k]; f != nil {
			f.route.Store(r)
			continue
		}
		f, err := p.open(k, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("listen %s %s: %w", k.proto, k.addr, err))
			continue
		}
		p.frontends[k] = f
	}
	return errors.Join(errs...)
}

// plan returns the frontends req wants, with their routes, and the
// addresses the VIP link must carry. It updates the persistent Service
// port state (backends, affinity), draining backends that left.
func (p *Proxier) plan(snap *snapshot.Snapshot) (map[frontendKey]*route, []netip.Addr) {
	want := map[frontendKey]*route{}
	vipSet := map[netip.Addr]struct{}{}
	seen := map[portKey]bool{}
	for _, nn := range sortedNames(snap.Services) {
		svc := snap.Services[nn]
		sched := p.cfg.Scheduler
		if ValidScheduler(svc.Scheduler) {
			sched = svc.Scheduler
		}
		for _, port := range svc.Ports {
			if port.Protocol != v1.ProtocolTCP && port.Protocol != v1.ProtocolUDP {
				continue // SCTP: not proxied in userspace
			}
			pk := portKey{svc: nn, port: port.Name, prot: port.Protocol}
			seen[pk] = true
			sp := p.servicePort(pk)
			all := snap.Endpoints[nn].For(port.Key())
			var keep []*backend
			for _, fam := range []snapshot.Family{v1.IPv4Protocol, v1.IPv6Protocol} {
				cip, ok := svc.ClusterIP(fam)
				if !ok {
					continue
				}
				pol := snapshot.PolicyOf(svc, port, fam)
				sel := snapshot.Select(snapshot.OfFamily(all, fam), pol, snap.Node)
				internal := sp.backends(sel.Internal(pol))
				external := sp.backends(sel.External(pol))
				keep = append(keep, internal...)
				keep = append(keep, external...)
				mk := func(bs []*backend, ranges []netip.Prefix) *route {
					return &route{sp: sp, backends: bs, sched: sp.scheduler(sched, bs), ranges: ranges, affinity: svc.AffinityTimeout,
						byFrontend: sched == SchedulerDestinationHash}
				}
				add := func(a netip.Addr, pt uint16, r *route) {
					if len(r.backends) == 0 {
						return // no socket: the kernel refuses
					}
					k := frontendKey{proto: port.Protocol, addr: netip.AddrPortFrom(a, pt)}
					if _, taken := want[k]; !taken { // first Service by name wins
						want[k] = r
					}
				}
				if p.cfg.VIPs != nil {
					vipSet[cip] = struct{}{}
					add(cip, port.Port, mk(internal, nil))
					ext := mk(external, nil)
					for _, a := range svc.ExternalIPsOf(fam) {
						vipSet[a] = struct{}{}
						add(a, port.Port, ext)
					}
					lb := ext
					if len(svc.SourceRanges) > 0 {
						// Ranges of the other family allow nobody; the
						// node itself reaches the VIP from the VIP.
						ranges := append(svc.SourceRangesOf(fam), netip.PrefixFrom(cip, cip.BitLen()))
						for _, v := range svc.LoadBalancerVIPsOf(fam) {
							ranges = append(ranges, netip.PrefixFrom(v, v.BitLen()))
						}
						lb = mk(external, ranges)
					}
					for _, a := range svc.LoadBalancerVIPsOf(fam) {
						vipSet[a] = struct{}{}
						add(a, port.Port, lb)
					}
				}
				if port.NodePort != 0 {
					ext := mk(external, nil)
					if snap.Node == nil || snap.Node.NodePorts.All {
						unspec := netip.IPv4Unspecified()
						if fam == v1.IPv6Protocol {
							unspec = netip.IPv6Unspecified()
						}
						add(unspec, port.NodePort, ext)
					} else {
						for _, a := range snap.Node.NodePorts.Of(fam) {
							add(a, port.NodePort, ext)
						}
					}
				}
			}
			sp.retain(keep, p.cfg.DrainTimeout)
		}
	}
	for pk, sp := range p.ports {
		if !seen[pk] {
			sp.remove(p.cfg.DrainTimeout)
			delete(p.ports, pk)
		}
	}
	vips := make([]netip.Addr, 0, len(vipSet))
	for a := range vipSet {
		vips = append(vips, a)
	}
	slices.SortFunc(vips, netip.Addr.Compare)
	return want, vips
}

// announce logs, once per change, where each Service is reachable when
// there are no VIPs (no root): its NodePorts, or nowhere.
func (p *Proxier) announce(snap *snapshot.Snapshot) {
	for nn, svc := range snap.Services {
		var where []string
		for _, port := range svc.Ports {
			if port.NodePort != 0 {
				host := "<node address>"
				if snap.Node != nil && len(snap.Node.NodePorts.Addrs) > 0 {
					host = snap.Node.NodePorts.Addrs[0].String()
				} else if snap.Node == nil || snap.Node.NodePorts.All {
					host = "127.0.0.1"
				}
				where = append(where, port.Name+"="+net.JoinHostPort(host, strconv.Itoa(int(port.NodePort)))+"/"+string(port.Protocol))
			}
		}
		msg := fmt.Sprint(where)
		if p.announced[nn] == msg {
			continue
		}
		p.announced[nn] = msg
		if len(where) == 0 {
			klog.InfoS("Service not reachable through this proxy without root (no NodePort); run as root or make it a NodePort Service", "service", nn)
		} else {
			klog.InfoS("Service reachable through this proxy at", "service", nn, "addresses", where)
		}
	}
	for nn := range p.announced {
		if _, ok := snap.Services[nn]; !ok {
			delete(p.announced, nn)
		}
	}
}

func (p *Proxier) servicePort(pk portKey) *servicePort {
	sp := p.ports[pk]
	if sp == nil {
		sp = &servicePort{key: pk, metrics: p.metrics, all: map[netip.AddrPort]*backend{}, affinity: map[netip.Addr]affinityEntry{}}
		p.ports[pk] = sp
	}
	return sp
}

// Close stops every listener and closes every connection; the Proxier
// cannot be used after it.
func (p *Proxier) Close() error {
	p.cancel()
	p.mu.Lock()
	for k, f := range p.frontends {
		f.close()
		delete(p.frontends, k)
	}
	for _, sp := range p.ports {
		sp.remove(0)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// Cleanup removes the VIP link. Connections are closed by Close.
func (p *Proxier) Cleanup(ctx context.Context) error {
	if p.cfg.VIPs == nil {
		return nil
	}
	return p.cfg.VIPs.Delete(ctx)
}

func sortedNames[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for nn := range m {
		out = append(out, nn)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
