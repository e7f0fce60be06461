package nodelifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

const (
	// LeaseNamespace holds the node heartbeat Leases, one per Node, named
	// after it.
	LeaseNamespace = corev1.NamespaceNodeLease
	// DefaultNodeMonitorGracePeriod and DefaultNodeMonitorPeriod are
	// upstream's kube-controller-manager defaults.
	DefaultNodeMonitorGracePeriod = 40 * time.Second
	DefaultNodeMonitorPeriod      = 5 * time.Second
)

// Options configure a Controller. The zero value is valid.
type Options struct {
	// NodeMonitorGracePeriod is how long a Node may go without renewing its
	// Lease before it is marked Unknown; 0 means the default.
	NodeMonitorGracePeriod time.Duration
	// NodeMonitorPeriod is how often Leases are checked; 0 means the default.
	NodeMonitorPeriod time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.WithTicker
	// Registerer receives the controller's Prometheus metrics; nil leaves
	// them unregistered.
	Registerer prometheus.Registerer
}

// Controller marks Nodes whose heartbeat Lease went stale, and their Pods,
// not ready.
type Controller struct {
	client     kubernetes.Interface
	factory    informers.SharedInformerFactory
	leaseInf   informers.SharedInformerFactory
	nodes      corelisters.NodeLister
	leases     coordinationlisters.LeaseNamespaceLister
	podsByNode *podutil.ByNode

	grace, period time.Duration
	clock         clock.WithTicker
	loop          *loop.Loop[string]
	metrics       *metrics

	mu     sync.Mutex
	health healthTracker
}

// New returns a controller that writes through client and reads Nodes and
// Pods from factory's informers. Leases are read from an informer of its
// own, limited to LeaseNamespace, that shares client.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) *Controller {
	if opts.NodeMonitorGracePeriod <= 0 {
		opts.NodeMonitorGracePeriod = DefaultNodeMonitorGracePeriod
	}
	if opts.NodeMonitorPeriod <= 0 {
		opts.NodeMonitorPeriod = DefaultNodeMonitorPeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(LeaseNamespace))
	nodeInf, podInf := factory.Core().V1().Nodes(), factory.Core().V1().Pods()
	leaseInf := leaseFactory.Coordination().V1().Leases()
	c := &Controller{
		client:     client,
		factory:    factory,
		leaseInf:   leaseFactory,
		nodes:      nodeInf.Lister(),
		leases:     leaseInf.Lister().Leases(LeaseNamespace),
		podsByNode: podutil.NewByNode(podInf.Informer()),
		grace:      opts.NodeMonitorGracePeriod,
		period:     opts.NodeMonitorPeriod,
		clock:      opts.Clock,
		metrics:    newMetrics(),
	}
	c.loop = loop.New(loop.Config[string]{
		Name: "node_lifecycle",
		// The next monitor pass queues a stale Node again; the retry with
		// back-off only makes it sooner.
		Sync:       c.markNotReady,
		Clock:      opts.Clock,
		Background: []func(context.Context){c.monitorLoop},
	})
	c.loop.WaitFor(nodeInf.Informer().HasSynced, podInf.Informer().HasSynced, leaseInf.Informer().HasSynced)
	c.loop.Collect(opts.Registerer, c.metrics.collectors()...)
	return c
}

// Run starts the informers that are not running yet, its Lease informer
// among them, waits for their caches, then checks every Node each
// NodeMonitorPeriod and marks the stale ones with workers goroutines, until
// ctx ends. It returns after every goroutine it started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	c.leaseInf.Start(ctx.Done())
	defer c.leaseInf.Shutdown()
	c.loop.Run(ctx, workers)
}

// monitorLoop checks the Leases at once and then every NodeMonitorPeriod
// until ctx ends.
func (c *Controller) monitorLoop(ctx context.Context) {
	klog.FromContext(ctx).Info("Monitoring node leases", "gracePeriod", c.grace, "period", c.period)
	ticker := c.clock.NewTicker(c.period)
	defer ticker.Stop()
	for {
		c.monitor(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// monitor checks every Node's Lease once and queues the stale Nodes.
func (c *Controller) monitor(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("list nodes: %w", err))
		return
	}
	now := c.clock.Now()
	keep := make(map[string]bool, len(nodes))
	byStatus := map[corev1.ConditionStatus]int{}
	var stale []string
	c.mu.Lock()
	for _, node := range nodes {
		keep[node.Name] = true
		byStatus[nodeReady(node)]++
		lease, err := c.leases.Get(node.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			utilruntime.HandleError(fmt.Errorf("get lease %s: %w", node.Name, err))
			continue
		}
		if c.health.stale(node.Name, lease, now, c.grace) {
			stale = append(stale, node.Name)
		}
	}
	c.health.retain(keep)
	c.mu.Unlock()
	c.metrics.setNodes(byStatus)
	for _, name := range stale {
		klog.FromContext(ctx).V(4).Info("Node lease is stale", "node", name)
		c.loop.Add(name)
	}
}

// markNotReady sets Node name's Ready condition Unknown and its Pods' Ready
// condition False, writing only what is not so already.
func (c *Controller) markNotReady(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if out := markNodeUnknown(node, c.clock.Now()); out != nil {
		if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set node %s Ready Unknown: %w", name, err)
		}
		logger.Info("Node stopped posting status, marked Ready Unknown", "node", name)
	}
	pods, err := c.podsByNode.On(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, pod := range pods {
		out := markPodNotReady(pod, c.clock.Now())
		if out == nil {
			continue
		}
		if _, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("set pod %s/%s not ready: %w", pod.Namespace, pod.Name, err))
			}
			continue
		}
		c.metrics.podsMarked.Inc()
		logger.V(2).Info("Marked pod not ready", "pod", klog.KObj(pod), "node", name)
	}
	return utilerrors.NewAggregate(errs)
}
