package podgc

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

// Upstream's kube-controller-manager values.
const (
	// DefaultCheckPeriod is how often every Pod is looked at.
	DefaultCheckPeriod = 20 * time.Second
	// DefaultQuarantineTime is how long a Node must stay missing from the
	// cache before the API is asked whether it exists.
	DefaultQuarantineTime = 40 * time.Second
	// DefaultTerminatedPodThreshold is how many terminated Pods are kept
	// (--terminated-pod-gc-threshold of portal controller-manager and server).
	DefaultTerminatedPodThreshold = 12500
)

// Options configure a Controller. The zero value is valid.
type Options struct {
	// CheckPeriod and QuarantineTime are 0 for the defaults.
	CheckPeriod, QuarantineTime time.Duration
	// TerminatedPodThreshold is how many terminated (Succeeded or Failed)
	// Pods to keep before the oldest are deleted: 0 for the default, less
	// than 0 to keep them all.
	TerminatedPodThreshold int
	// Clock is the time source; nil means the real clock.
	Clock clock.WithTicker
	// Registerer receives the controller's Prometheus metrics while it
	// runs; nil leaves them unregistered.
	Registerer prometheus.Registerer
}

// key is one unit of the collector's work: a Node missing from the cache,
// whose Pods go if the API confirms it is gone, or a Pod to delete for
// what decide says of it then.
type key struct {
	node string
	pod  types.NamespacedName
	// terminated: the Pod is one of the terminated Pods over the
	// threshold; uid is that Pod's, so that a newer Pod of the same name
	// (a StatefulSet's, recreated since) is not deleted in its place.
	terminated bool
	uid        types.UID
}

// Controller force-deletes Pods no node agent will finish (see the package
// doc).
type Controller struct {
	client     kubernetes.Interface
	factory    informers.SharedInformerFactory
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	podsByNode *podutil.ByNode
	period     time.Duration
	quarantine time.Duration
	threshold  int
	clock      clock.WithTicker
	loop       *loop.Loop[key]
	metrics    *metrics
}

// New returns a collector that writes through client and reads Pods and
// Nodes from factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) *Controller {
	if opts.CheckPeriod <= 0 {
		opts.CheckPeriod = DefaultCheckPeriod
	}
	if opts.QuarantineTime <= 0 {
		opts.QuarantineTime = DefaultQuarantineTime
	}
	if opts.TerminatedPodThreshold == 0 {
		opts.TerminatedPodThreshold = DefaultTerminatedPodThreshold
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	podInf, nodeInf := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	c := &Controller{
		client:     client,
		factory:    factory,
		pods:       podInf.Lister(),
		nodes:      nodeInf.Lister(),
		podsByNode: podutil.NewByNode(podInf.Informer()),
		period:     opts.CheckPeriod,
		quarantine: opts.QuarantineTime,
		threshold:  opts.TerminatedPodThreshold,
		clock:      opts.Clock,
		metrics:    newMetrics(),
	}
	c.loop = loop.New(loop.Config[key]{
		Name:           "pod_garbage_collector",
		QueueName:      "orphaned_pods_nodes",
		Sync:           c.sync,
		Clock:          opts.Clock,
		ReportFailures: true,
		Background:     []func(context.Context){c.checkLoop},
	})
	c.loop.WaitFor(podInf.Informer().HasSynced, nodeInf.Informer().HasSynced)
	c.loop.Collect(opts.Registerer, c.metrics.collectors()...)
	return c
}

// Run starts the informers that are not running yet, waits for their
// caches, then looks at every Pod each CheckPeriod and deletes with
// workers goroutines, until ctx ends. It returns after every goroutine it
// started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	c.loop.Run(ctx, workers)
}

// checkLoop checks every Pod at once and then every CheckPeriod.
func (c *Controller) checkLoop(ctx context.Context) {
	ticker := c.clock.NewTicker(c.period)
	defer ticker.Stop()
	for {
		c.check()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// check queues the Pods to delete and quarantines the missing Nodes that
// Pods are bound to. Adding a quarantined Node again keeps its first due
// time, so it is looked up QuarantineTime after it was first missed.
func (c *Controller) check() {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("list pods: %w", err))
		return
	}
	for _, pod := range overThreshold(pods, c.threshold) {
		c.loop.Add(key{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, terminated: true, uid: pod.UID})
	}
	for _, pod := range pods {
		switch decide(pod, c.node(pod.Spec.NodeName), c.clock.Now()) {
		case orphaned:
			c.loop.AddAfter(key{node: pod.Spec.NodeName}, c.quarantine)
		case terminatingOutOfService, terminatingNotReady, terminatingUnscheduled:
			c.loop.Add(key{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}})
		}
	}
}

// node is name's Node from the cache, nil when it has none.
func (c *Controller) node(name string) *corev1.Node {
	if name == "" {
		return nil
	}
	node, err := c.nodes.Get(name)
	if err != nil {
		return nil
	}
	return node
}

func (c *Controller) sync(ctx context.Context, k key) error {
	if k.node != "" {
		return c.collectOrphans(ctx, k.node)
	}
	pod, err := c.pods.Pods(k.pod.Namespace).Get(k.pod.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if k.terminated {
		// Terminated Pods stay terminated; the count over the
		// threshold was the check's, and for the Pod it counted.
		if pod.UID != k.uid || !isTerminated(pod) {
			return nil
		}
		return c.delete(ctx, pod, terminated, nil)
	}
	// What was true when the Pod was queued may not be now.
	switch r := decide(pod, c.node(pod.Spec.NodeName), c.clock.Now()); r {
	case terminatingOutOfService, terminatingNotReady, terminatingUnscheduled:
		return c.delete(ctx, pod, r, nil)
	}
	return nil
}

// collectOrphans deletes the Pods bound to Node name once the API, not
// only the cache, says it does not exist.
func (c *Controller) collectOrphans(ctx context.Context, name string) error {
	if c.node(name) != nil {
		return nil
	}
	_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("look up node %s: %w", name, err)
	}
	pods, err := c.podsByNode.On(name)
	if err != nil {
		return err
	}
	cond := &corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: orphanedConditionReason, Message: orphanedConditionMessage,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	}
	var errs []error
	for _, pod := range pods {
		if err := c.delete(ctx, pod, orphaned, cond); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// delete marks pod Failed, as no agent will, and deletes it at once. A Pod
// that is gone already counts as done.
func (c *Controller) delete(ctx context.Context, pod *corev1.Pod, r reason, cond *corev1.PodCondition) error {
	err := c.markFailedAndDelete(ctx, pod, cond)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.metrics.failed.WithLabelValues(pod.Namespace, string(r)).Inc()
		return fmt.Errorf("delete pod %s/%s (%s): %w", pod.Namespace, pod.Name, r, err)
	}
	c.metrics.deleted.WithLabelValues(pod.Namespace, string(r)).Inc()
	klog.FromContext(ctx).Info("Force-deleted pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "reason", r)
	return nil
}

func (c *Controller) markFailedAndDelete(ctx context.Context, pod *corev1.Pod, cond *corev1.PodCondition) error {
	if out := failed(pod, cond); out != nil {
		if _, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	zero := int64(0)
	return c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
}
