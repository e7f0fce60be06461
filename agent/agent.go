//go:build linux

// Package agent is Portal's node agent, kubelet's job done with plain
// processes: it registers the Node and renews its Lease, runs the pods
// bound to the node as processes in their own network namespaces (see
// agent/container and agent/podnet), probes them, and writes their status
// through the API. It talks to nothing but the API server and this node's
// kernel; other components learn of pods only through pod status.
//
// State under Options.RootDir:
//
//	ipam/<cidr>/<ip>                 address allocations (owner: pod UID)
//	pods/<uid>/state.json            sandbox and container PIDs, restart counts
//	pods/<uid>/etc/{resolv.conf,hosts,hostname}  bind-mounted into the pod
//	pods/<uid>/logs/<container>/<n>.log  output of the container's n-th run
//	pods/<uid>/exit/<container>      exit code of an init container's last run
//
// An agent that restarts re-adopts the processes listed in the state files
// (PID plus start time, so a reused PID is not mistaken for the pod).
//
// Init containers run one at a time, in order, each to success, before
// the app containers. Sidecars (init containers with restartPolicy Always)
// start in that order too, the next container once a sidecar's startup
// probe passed; they restart whenever they exit and stop after the app
// containers.
//
// Logs are served over HTTPS on Options.Port (10250), to the API server
// only: the client certificate must be the cluster CA's and name
// pki.APIServerAgentClientUser.
//
//	GET /containerLogs/{namespace}/{pod}/{container}?follow=true&previous=true&tailLines=N
//
// the output of the container's current run (previous: the run before),
// as kubelet serves it to the API server's pods/log. For portal explain
// it also answers whether a pod's port listens (/dial) and forwards its
// node's proxy status (/proxystatus/), see diag.go. The same port serves
// the streaming verbs over SPDY, as kubelet does:
//
//	/exec/{namespace}/{pod}/{container}?command=...&input=1&output=1&error=1&tty=1
//	/attach/{namespace}/{pod}/{container}?...
//	/portForward/{namespace}/{pod}
//
// exec joins the running container's namespaces (through nsenter, mounts
// included); attach reaches a container started with stdin: true through
// the stdin (or, with tty: true, the pty) the agent holds for it, which a
// restarted agent no longer has; port-forward dials from inside the pod's
// network namespace. kubectl cp runs tar through exec: the pod, which sees
// the node's filesystem, needs tar there.
//
// Each pod has a cgroup of its own and each container one inside it
// (agent/cgroup: portal/pod<uid>/<container>), made when the container
// first starts with its resources.limits (memory limit, CFS quota) and
// removed with the pod; a restarted agent finds them by name again. A
// run the kernel's out-of-memory killer ended in its cgroup is reported
// as kubelet does, reason OOMKilled. The same port serves the figures:
//
//	GET /metrics/resource
//
// the node's, pods' and running containers' CPU time and memory working
// set in kubelet's Prometheus text, which the API server scrapes for
// metrics.k8s.io.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent/cgroup"
	"portal.dev/portal/agent/podnet"
	"portal.dev/portal/agent/resolvconf"
)

// Agent is one node's agent.
type Agent struct {
	client  kubernetes.Interface
	opts    Options
	nodeIPs []netip.Addr

	lease      *coordinationv1.Lease
	lastReport time.Time

	factory    informers.SharedInformerFactory // nodes, services
	podFactory informers.SharedInformerFactory // this node's pods
	nodes      corelisters.NodeLister
	services   corelisters.ServiceLister
	pods       corelisters.PodLister

	runtime Runtime
	cgroups *cgroup.Manager // nil: pods run without cgroups
	net     Network         // nil until the pod CIDRs are known
	dnsNode resolvconf.File

	mu        sync.Mutex
	workers   map[types.UID]*podWorker
	adopted   map[types.UID]*podRuntime
	peersKick chan struct{}
	wg        sync.WaitGroup

	ready   atomic.Bool
	readyCh chan struct{}

	recorder record.EventRecorder // nil until Run
}

// New returns an agent that works through client. Options are validated
// here.
func New(client kubernetes.Interface, opts Options) (*Agent, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	a := &Agent{client: client, opts: opts, nodeIPs: opts.NodeIPs, workers: map[types.UID]*podWorker{},
		readyCh: make(chan struct{}), runtime: opts.Runtime}
	if a.runtime == nil {
		a.runtime = processRuntime{}
	}
	if len(a.nodeIPs) == 0 {
		a.nodeIPs = DefaultNodeIPs()
	}
	if len(a.nodeIPs) == 0 {
		return nil, fmt.Errorf("no node IP: the host has no non-loopback address; set --node-ip")
	}
	a.factory = informers.NewSharedInformerFactory(client, 0)
	a.podFactory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", opts.NodeName).String()
		}))
	a.nodes = a.factory.Core().V1().Nodes().Lister()
	a.services = a.factory.Core().V1().Services().Lister()
	a.pods = a.podFactory.Core().V1().Pods().Lister()
	return a, nil
}

// Ready says whether the node is registered, its pod network built and
// its caches synced.
func (a *Agent) Ready() bool { return a.ready.Load() }

// BecameReady is closed when Ready first returns true.
func (a *Agent) BecameReady() <-chan struct{} { return a.readyCh }

// Run registers the node and runs its pods until ctx ends. Pods keep
// running when the agent stops: the next agent adopts them.
func (a *Agent) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", a.opts.NodeName)
	ctx = klog.NewContext(ctx, logger)
	defer utilruntime.HandleCrash()
	for _, d := range []string{"pods", "ipam"} {
		if err := os.MkdirAll(filepath.Join(a.opts.RootDir, d), 0o700); err != nil {
			return fmt.Errorf("agent root dir: %w", err)
		}
	}
	a.dnsNode = resolvconf.Parse([]byte(readFile(a.opts.ResolvConf)))
	if a.opts.HealthzBindAddress != "" {
		if err := a.serveHealthz(ctx); err != nil {
			return err
		}
	}
	var node *corev1.Node
	for {
		var err error
		if node, err = a.registerNode(ctx); err == nil {
			break
		}
		logger.Error(err, "Register node; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	if err := a.renewLease(ctx, node); err != nil {
		logger.Error(err, "Create node lease")
	}
	if err := a.syncNodeStatus(ctx, true); err != nil {
		logger.Error(err, "Update node status")
	}
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.heartbeat(ctx, node) }()
	defer a.wg.Wait()

	nodeInf := a.factory.Core().V1().Nodes().Informer()
	nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.kickPeers() },
		UpdateFunc: func(any, any) { a.kickPeers() },
		DeleteFunc: func(any) { a.kickPeers() },
	})
	a.factory.Core().V1().Services().Informer()
	a.factory.Start(ctx.Done())
	defer a.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodeInf.HasSynced, a.factory.Core().V1().Services().Informer().HasSynced) {
		return nil
	}
	cidrs, err := a.waitPodCIDRs(ctx)
	if err != nil || ctx.Err() != nil {
		return err
	}
	newNetwork := a.opts.NewNetwork
	if newNetwork == nil {
		newNetwork = newPodNetwork
	}
	a.net = newNetwork(NetworkConfig{PodCIDRs: cidrs, ClusterCIDRs: a.opts.ClusterCIDRs, StateDir: filepath.Join(a.opts.RootDir, "ipam")})
	if err := a.net.Setup(ctx); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	logger.Info("Pod network ready", "podCIDRs", cidrs, "bridge", podnet.DefaultBridge)
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.syncPeersLoop(ctx) }()

	a.startEvents(ctx)
	a.detectCgroups(ctx)
	defer a.podFactory.Shutdown()
	if !a.runPods(ctx) {
		return nil
	}
	if a.opts.Port != 0 {
		if err := a.serveLogs(ctx); err != nil {
			logger.Error(err, "Log endpoint not served")
		}
	}
	a.mu.Lock()
	pods := len(a.workers)
	a.mu.Unlock()
	a.ready.Store(true)
	close(a.readyCh)
	logger.Info("Node agent ready", "pods", pods)
	<-ctx.Done()
	return nil
}

// runPods adopts the pods an earlier agent ran, starts watching this
// node's pods, and stops the adopted pods that are gone from the API. It
// returns false when ctx ended before the pods were listed.
func (a *Agent) runPods(ctx context.Context) bool {
	adopted := a.loadStates(ctx)
	podInf := a.podFactory.Core().V1().Pods().Informer()
	reg, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.podEvent(ctx, obj) },
		UpdateFunc: func(_, obj any) { a.podEvent(ctx, obj) },
		DeleteFunc: func(obj any) { a.podEvent(ctx, obj) },
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Watching this node's pods")
		return false
	}
	a.podFactory.Start(ctx.Done())
	// The handler's own sync, not the informer's: the store fills before
	// the handler has seen every listed pod, and an adopted pod whose add
	// event is still on its way would be taken for gone and stopped.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return false
	}
	// Pods an earlier agent ran that are gone from the API: stop them.
	for uid, rt := range adopted {
		a.mu.Lock()
		_, known := a.workers[uid]
		a.mu.Unlock()
		if !known {
			klog.FromContext(ctx).Info("Pod of an earlier run is gone; stopping it", "pod", rt.key(), "uid", uid)
			a.startWorker(ctx, uid, rt)
		}
	}
	a.cleanOrphanAddresses(ctx)
	a.cleanOrphanCgroups(ctx)
	return true
}

// waitPodCIDRs returns --pod-cidr, else waits for spec.podCIDRs.
func (a *Agent) waitPodCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	if len(a.opts.PodCIDRs) > 0 {
		return a.opts.PodCIDRs, nil
	}
	logged := false
	for {
		if n, err := a.nodes.Get(a.opts.NodeName); err == nil && len(n.Spec.PodCIDRs) > 0 {
			var out []netip.Prefix
			for _, s := range n.Spec.PodCIDRs {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					return nil, fmt.Errorf("node %s spec.podCIDRs: %w", n.Name, err)
				}
				out = append(out, p.Masked())
			}
			return out, nil
		}
		if !logged {
			klog.FromContext(ctx).Info("Waiting for the node's pod CIDR (node IPAM, or --pod-cidr)")
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var errNoNetwork = errors.New("pod network not set up")

// kickPeers asks for a route sync; node events coalesce into one.
func (a *Agent) kickPeers() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.peersKick == nil {
		a.peersKick = make(chan struct{}, 1)
	}
	select {
	case a.peersKick <- struct{}{}:
	default:
	}
}

func (a *Agent) syncPeersLoop(ctx context.Context) {
	a.kickPeers()
	a.mu.Lock()
	kick := a.peersKick
	a.mu.Unlock()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-retry.C:
		}
		if err := a.syncPeers(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Sync routes to other nodes")
			retry.Reset(5 * time.Second)
		}
	}
}

func (a *Agent) syncPeers(ctx context.Context) error {
	if a.net == nil {
		return errNoNetwork
	}
	nodes, err := a.nodes.List(everything)
	if err != nil {
		return err
	}
	var peers []podnet.Peer
	for _, n := range nodes {
		if n.Name == a.opts.NodeName {
			continue
		}
		p := podnet.Peer{Name: n.Name}
		for _, s := range n.Spec.PodCIDRs {
			if c, err := netip.ParsePrefix(s); err == nil {
				p.PodCIDRs = append(p.PodCIDRs, c.Masked())
			}
		}
		for _, addr := range n.Status.Addresses {
			if addr.Type != corev1.NodeInternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(addr.Address); err == nil {
				p.IPs = append(p.IPs, ip)
			}
		}
		if len(p.PodCIDRs) > 0 && len(p.IPs) > 0 {
			peers = append(peers, p)
		}
	}
	slices.SortFunc(peers, func(x, y podnet.Peer) int {
		if x.Name < y.Name {
			return -1
		}
		return 1
	})
	return a.net.SyncPeers(ctx, peers)
}

func (a *Agent) serveHealthz(ctx context.Context) error {
	l, err := net.Listen("tcp", a.opts.HealthzBindAddress)
	if err != nil {
		return fmt.Errorf("--healthz-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !a.Ready() {
			http.Error(w, "agent not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	go func() { <-ctx.Done(); srv.Close() }()
	return nil
}
