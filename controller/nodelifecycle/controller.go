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
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// LeaseNamespace holds the node heartbeat Leases, one per Node, named
	// after it.
	LeaseNamespace = corev1.NamespaceNodeLease
	// DefaultNodeMonitorGracePeriod and DefaultNodeMonitorPeriod are
	// upstream's kube-controller-manager defaults.
	DefaultNodeMonitorGracePeriod = 40 * time.Second
	DefaultNodeMonitorPeriod      = 5 * time.Second

	podNodeIndex = "portal.dev/nodelifecycle-pod-node"
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
	pods       corelisters.PodLister
	podsByNode cache.Indexer // nil: scan all Pods
	synced     []cache.InformerSynced

	grace, period time.Duration
	clock         clock.WithTicker
	queue         workqueue.TypedRateLimitingInterface[string]
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
		pods:       podInf.Lister(),
		podsByNode: addPodNodeIndex(podInf.Informer()),
		synced:     []cache.InformerSynced{nodeInf.Informer().HasSynced, podInf.Informer().HasSynced, leaseInf.Informer().HasSynced},
		grace:      opts.NodeMonitorGracePeriod,
		period:     opts.NodeMonitorPeriod,
		clock:      opts.Clock,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node_lifecycle", Clock: opts.Clock}),
		metrics: newMetrics(),
	}
	c.metrics.register(opts.Registerer)
	return c
}

func addPodNodeIndex(inf cache.SharedIndexInformer) cache.Indexer {
	if _, ok := inf.GetIndexer().GetIndexers()[podNodeIndex]; ok {
		return inf.GetIndexer()
	}
	err := inf.AddIndexers(cache.Indexers{podNodeIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("add Pod index by node; marking a node's Pods will scan all Pods: %w", err))
		return nil
	}
	return inf.GetIndexer()
}

// Run starts the informers that are not running yet, waits for their
// caches, then checks every Node each NodeMonitorPeriod and marks the stale
// ones with workers goroutines, until ctx ends. It returns after every
// goroutine it started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)
	logger.Info("Starting node lifecycle controller", "workers", workers, "gracePeriod", c.grace)
	defer logger.Info("Stopped node lifecycle controller")
	defer c.queue.ShutDown()

	c.factory.Start(ctx.Done())
	c.leaseInf.Start(ctx.Done())
	defer c.leaseInf.Shutdown()
	if !cache.WaitForNamedCacheSync("nodelifecycle", ctx.Done(), c.synced...) {
		return
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	ticker := c.clock.NewTicker(c.period)
	defer ticker.Stop()
	for {
		c.monitor(ctx)
		select {
		case <-ctx.Done():
			c.queue.ShutDown()
			wg.Wait()
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
		c.queue.Add(name)
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.markNotReady(ctx, name); err != nil {
		// The next monitor pass queues the Node again; the rate-limited
		// retry only makes it sooner.
		klog.FromContext(ctx).V(2).Info("Marking node not ready failed, will retry", "node", name, "err", err)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
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
	pods, err := c.podsOn(name)
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

// podsOn returns the Pods bound to node.
func (c *Controller) podsOn(node string) ([]*corev1.Pod, error) {
	if c.podsByNode != nil {
		objs, err := c.podsByNode.ByIndex(podNodeIndex, node)
		if err != nil {
			return nil, err
		}
		pods := make([]*corev1.Pod, 0, len(objs))
		for _, o := range objs {
			pods = append(pods, o.(*corev1.Pod))
		}
		return pods, nil
	}
	all, err := c.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, p := range all {
		if p.Spec.NodeName == node {
			pods = append(pods, p)
		}
	}
	return pods, nil
}
