// Package manager runs Portal's controllers as one leader-elected unit, the
// way kube-controller-manager does: every replica campaigns for a Lease in
// kube-system, the leader runs the controllers, the others wait and take
// over when the leader stops renewing. It talks to the API only through the
// client it is given, so it runs the same in `portal server` and as
// `portal controller-manager` on another machine.
package manager

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"portal.dev/portal/controller/nodeipam"
	"portal.dev/portal/controller/podgc"
	"portal.dev/portal/controller/servicelb"
	"portal.dev/portal/internal/cidrflag"
)

// Options configure the controllers; flag names follow kube-controller-manager.
type Options struct {
	// LeaderElect campaigns for the Lease; without it this replica always leads.
	LeaderElect   bool
	LeaseName     string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Identity names this replica in the Lease (default: host name + random).
	Identity string

	MaxEndpointsPerSlice int
	// LoadBalancerIPPools is --loadbalancer-ip-pools: CIDRs and ranges;
	// empty gives LoadBalancer Services the nodes' addresses.
	LoadBalancerIPPools string
	// LoadBalancerReservedPorts is --loadbalancer-reserved-ports: ports
	// ("80/TCP,443/TCP") that, without pools, no LoadBalancer Service gets
	// on the nodes' addresses, because another process listens there (an
	// Ingress controller run as `portal ingress`).
	LoadBalancerReservedPorts string
	// ReservedNodePorts are more such ports, with their holders: those
	// `portal server` listens on itself.
	ReservedNodePorts []servicelb.ReservedPort
	// NodeMonitorGracePeriod is how long a node may go without renewing
	// its Lease before it is marked Unknown and its pods not ready.
	NodeMonitorGracePeriod time.Duration
	// ClusterCIDR is --cluster-cidr, the pod ranges (v4, v6) node IPAM
	// gives each Node a spec.podCIDR from; empty turns node IPAM off.
	ClusterCIDR string
	// NodeCIDRMaskSizeIPv4 and IPv6 are the sizes of a node's podCIDR.
	NodeCIDRMaskSizeIPv4, NodeCIDRMaskSizeIPv6 int
	// TerminatedPodGCThreshold is --terminated-pod-gc-threshold: how many
	// terminated Pods the pod garbage collector keeps; 0 or less keeps
	// them all, as upstream.
	TerminatedPodGCThreshold int
	Workers                  int
	// Registerer receives the controllers' metrics while they run; nil
	// means component-base's legacyregistry, which the controller
	// manager's /metrics serves.
	Registerer prometheus.Registerer
}

// DefaultOptions fail over within 15 s. A follower takes the Lease once it
// has seen no renewal for LeaseDuration; it looks every RetryPeriod, which
// client-go stretches by up to 2.2x with jitter. Worst case: the renewal
// it last saw was a RetryPeriod old, so 1 + 8 + 2.2 s, about 11 s.
func DefaultOptions() Options {
	return Options{
		LeaderElect:              true,
		LeaseName:                "portal-controller-manager",
		LeaseDuration:            8 * time.Second,
		RenewDeadline:            5 * time.Second,
		RetryPeriod:              1 * time.Second,
		MaxEndpointsPerSlice:     100,
		NodeMonitorGracePeriod:   40 * time.Second,
		ClusterCIDR:              "10.244.0.0/16",
		NodeCIDRMaskSizeIPv4:     24,
		NodeCIDRMaskSizeIPv6:     64,
		TerminatedPodGCThreshold: podgc.DefaultTerminatedPodThreshold,
		Workers:                  4,
	}
}

// Manager runs the controllers while it leads.
type Manager struct {
	opts    Options
	cfg     *rest.Config
	leading atomic.Bool
	synced  atomic.Bool
	elector atomic.Pointer[leaderelection.LeaderElector]
}

// New returns a manager using cfg to reach the API.
func New(cfg *rest.Config, opts Options) *Manager {
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = host + "_" + uuid.NewString()
	}
	return &Manager{opts: opts, cfg: cfg}
}

// Ready reports whether this replica has its controllers running with
// synced caches, or follows a leader that is someone else.
func (m *Manager) Ready() bool {
	if m.leading.Load() {
		return m.synced.Load()
	}
	le := m.elector.Load()
	if le == nil {
		return false
	}
	leader := le.GetLeader()
	return leader != "" && leader != m.opts.Identity
}

func (m *Manager) registerer() prometheus.Registerer {
	if m.opts.Registerer != nil {
		return m.opts.Registerer
	}
	return legacyregistry.Registerer()
}

// Leading reports whether this replica leads now.
func (m *Manager) Leading() bool { return m.leading.Load() }

// Run campaigns and runs the controllers while leading, until ctx ends.
// Losing the Lease stops the controllers; the replica then campaigns again.
func (m *Manager) Run(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(m.cfg)
	if err != nil {
		return err
	}
	if !m.opts.LeaderElect {
		m.leading.Store(true)
		return m.runControllers(ctx)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(m.opts.LeaseName),
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: m.opts.Identity},
	}
	for ctx.Err() == nil {
		// client-go runs OnStartedLeading in a goroutine of its own and
		// does not wait for it; the gate does, so that a new term never
		// starts while the last one's controllers are still stopping, and
		// Run returns only once they have stopped.
		term := &gate{}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   m.opts.LeaseDuration,
			RenewDeadline:   m.opts.RenewDeadline,
			RetryPeriod:     m.opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            m.opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					if !term.enter() {
						return // the term ended before it began
					}
					defer term.leave()
					klog.InfoS("Leading; starting controllers", "identity", m.opts.Identity)
					m.leading.Store(true)
					if err := m.runControllers(ctx); err != nil {
						klog.ErrorS(err, "Controllers stopped")
					}
				},
				OnStoppedLeading: func() {
					klog.InfoS("Stopped leading", "identity", m.opts.Identity)
					m.leading.Store(false)
					m.synced.Store(false)
				},
			},
		})
		if err != nil {
			return err
		}
		m.elector.Store(le)
		le.Run(ctx)
		term.closeAndWait()
	}
	return nil
}

// gate lets goroutines in until it is closed, and closing it waits for
// those inside to leave.
type gate struct {
	mu     sync.Mutex
	closed bool
	inside sync.WaitGroup
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.inside.Add(1)
	return true
}

func (g *gate) leave() { g.inside.Done() }

func (g *gate) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.inside.Wait()
}

// runControllers starts every controller on fresh informers and blocks
// until ctx ends and every controller has stopped.
func (m *Manager) runControllers(ctx context.Context) error {
	cc, err := m.newControllerContext(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// On every return: stop what was started, wait for it, then for the
	// informers and the event broadcaster the controllers used.
	defer func() {
		cancel()
		wg.Wait()
		cc.informers.Shutdown()
		cc.shutdown()
	}()
	started, err := startControllers(ctx, &wg, cc, false)
	if err != nil {
		return fmt.Errorf("start controllers: %w", err)
	}
	cc.informers.Start(ctx.Done())
	for typ, ok := range cc.informers.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	late, err := startControllers(ctx, &wg, cc, true)
	if err != nil {
		return fmt.Errorf("start controllers: %w", err)
	}
	started = append(started, late...)
	m.synced.Store(true)
	klog.InfoS("Controllers running", "controllers", started)
	<-ctx.Done()
	return nil
}

// newControllerContext builds the clients and informers of one term of
// leadership.
func (m *Manager) newControllerContext(ctx context.Context) (controllerContext, error) {
	cfg := rest.CopyConfig(m.cfg)
	cfg.QPS, cfg.Burst = 200, 400
	// Typed clients speak protobuf, as upstream's controllers do: lists of
	// ten thousand pods decode several times faster than JSON.
	typed := rest.CopyConfig(cfg)
	typed.ContentType = "application/vnd.kubernetes.protobuf"
	typed.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(typed)
	if err != nil {
		return controllerContext{}, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return controllerContext{}, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return controllerContext{}, err
	}
	recorder, shutdown := newRecorders(ctx, client)
	newClient := func(controller string) (kubernetes.Interface, error) {
		own := rest.CopyConfig(typed)
		own.UserAgent = rest.DefaultKubernetesUserAgent() + "/" + controller
		return kubernetes.NewForConfig(own)
	}
	rootCA := cfg.TLSClientConfig.CAData
	if len(rootCA) == 0 && cfg.TLSClientConfig.CAFile != "" {
		if rootCA, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			return controllerContext{}, fmt.Errorf("root CA: %w", err)
		}
	}
	return controllerContext{
		client: client, newClient: newClient, metadata: meta, discovery: disc, opts: m.opts, rootCA: rootCA,
		informers:  newInformers(client),
		recorder:   recorder,
		shutdown:   shutdown,
		registerer: m.registerer(),
	}, nil
}

// Validate checks the options before anything starts, so a bad flag fails
// the command instead of a controller later.
func (o Options) Validate() error {
	if o.LoadBalancerIPPools != "" {
		if _, err := servicelb.ParsePools(o.LoadBalancerIPPools); err != nil {
			return fmt.Errorf("--loadbalancer-ip-pools: %w", err)
		}
	}
	if _, err := o.reservedPorts(); err != nil {
		return err
	}
	cidrs, err := ParseClusterCIDRs(o.ClusterCIDR)
	if err != nil {
		return err
	}
	if o.NodeCIDRMaskSizeIPv4 < 8 || o.NodeCIDRMaskSizeIPv4 > 30 {
		return fmt.Errorf("--node-cidr-mask-size-ipv4 must be between 8 and 30, got %d", o.NodeCIDRMaskSizeIPv4)
	}
	if o.NodeCIDRMaskSizeIPv6 < 16 || o.NodeCIDRMaskSizeIPv6 > 126 {
		return fmt.Errorf("--node-cidr-mask-size-ipv6 must be between 16 and 126, got %d", o.NodeCIDRMaskSizeIPv6)
	}
	if o.MaxEndpointsPerSlice < 1 || o.MaxEndpointsPerSlice > 1000 {
		return fmt.Errorf("--max-endpoints-per-slice must be between 1 and 1000, got %d", o.MaxEndpointsPerSlice)
	}
	if len(cidrs) > 0 {
		ipam := nodeipam.Options{ClusterCIDRs: cidrs,
			NodeCIDRMaskSizeIPv4: o.NodeCIDRMaskSizeIPv4, NodeCIDRMaskSizeIPv6: o.NodeCIDRMaskSizeIPv6}
		if err := ipam.Validate(); err != nil {
			return fmt.Errorf("--cluster-cidr with --node-cidr-mask-size: %w", err)
		}
	}
	return nil
}

// ParseClusterCIDRs parses --cluster-cidr by the rule every component
// reads it with (see cidrflag): empty, or one range per IP family,
// comma-separated, without host bits.
func ParseClusterCIDRs(s string) ([]netip.Prefix, error) {
	return cidrflag.Parse("--cluster-cidr", s)
}

// reservedPorts returns the ports no LoadBalancer Service gets on the
// nodes' addresses: those of --loadbalancer-reserved-ports, then
// ReservedNodePorts.
func (o Options) reservedPorts() ([]servicelb.ReservedPort, error) {
	flagged, err := servicelb.ParseReservedPorts(o.LoadBalancerReservedPorts, "a process named in --loadbalancer-reserved-ports")
	if err != nil {
		return nil, fmt.Errorf("--loadbalancer-reserved-ports: %w", err)
	}
	return append(flagged, o.ReservedNodePorts...), nil
}
