package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/internal/loop"
)

const (
	// Upstream's pod backoff bounds.
	initialBackoff = time.Second
	maxBackoff     = 10 * time.Second
)

// Options configure a Scheduler. The zero value is valid.
type Options struct {
	// SchedulerName is the spec.schedulerName this scheduler serves; ""
	// means corev1.DefaultSchedulerName, which also serves Pods naming none.
	SchedulerName string
	// Registerer receives the scheduler's Prometheus metrics; nil leaves
	// them unregistered.
	Registerer prometheus.Registerer
}

// assumed is a bind made but not yet seen in the Pod cache.
type assumed struct {
	uid  types.UID
	node string
}

// Scheduler binds pending Pods to Nodes.
type Scheduler struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	recorder record.EventRecorder
	name     string
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	byNode   *podutil.ByNode
	loop     *loop.Loop[string]
	attempts *prometheus.CounterVec

	// mu makes choosing a Node and assuming the bind one step, so that two
	// workers do not both count a Node as the emptiest.
	mu      sync.Mutex
	assumed map[string]assumed // by Pod key

	// binds are the binding calls in flight; Run waits for them.
	binds sync.WaitGroup
}

// New returns a scheduler that binds through client, reads Pods and Nodes
// from factory's informers and reports through recorder. It adds its event
// handlers now; Run starts the work.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, opts Options) *Scheduler {
	if opts.SchedulerName == "" {
		opts.SchedulerName = corev1.DefaultSchedulerName
	}
	podInf, nodeInf := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	s := &Scheduler{
		client:   client,
		factory:  factory,
		recorder: recorder,
		name:     opts.SchedulerName,
		nodes:    nodeInf.Lister(),
		pods:     podInf.Lister(),
		byNode:   podutil.NewByNode(podInf.Informer()),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "scheduler",
			Name:      "schedule_attempts_total",
			Help:      "Number of attempts to schedule Pods, by result (scheduled, unschedulable, error).",
		}, []string{"result"}),
		assumed: map[string]assumed{},
	}
	s.loop = loop.New(loop.Config[string]{
		Name: "scheduler",
		Sync: s.sync,
		// A Pod that fits nowhere is tried again with upstream's back-off,
		// and at once when a Node changes.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](initialBackoff, maxBackoff),
	})
	s.loop.Collect(opts.Registerer, s.attempts)
	s.loop.WatchOrLog(podInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    s.onPod,
		UpdateFunc: func(_, obj any) { s.onPod(obj) },
		DeleteFunc: s.onPodDelete,
	})
	s.loop.WatchOrLog(nodeInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.requeuePending() },
		UpdateFunc: func(any, any) { s.requeuePending() },
		DeleteFunc: func(any) { s.requeuePending() },
	})
	return s
}

// Run starts the factory's informers that are not running yet, waits for
// their caches and schedules with workers goroutines until ctx ends. It
// returns after every worker has stopped.
func (s *Scheduler) Run(ctx context.Context, workers int) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("schedulerName", s.name))
	s.factory.Start(ctx.Done())
	s.loop.Run(ctx, workers)
	s.binds.Wait()
}

func (s *Scheduler) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key, _ := cache.MetaNamespaceKeyFunc(pod)
	if pod.Spec.NodeName != "" {
		s.forget(key)
		return
	}
	if responsible(pod, s.name) {
		s.loop.Add(key)
	}
}

func (s *Scheduler) onPodDelete(obj any) {
	if key, ok := loop.Key(obj); ok {
		s.forget(key)
	}
}

func (s *Scheduler) forget(key string) {
	s.mu.Lock()
	delete(s.assumed, key)
	s.mu.Unlock()
}

// requeuePending queues every pending Pod now: a Node change may make room.
func (s *Scheduler) requeuePending() {
	pods, _ := s.byNode.On("")
	for _, pod := range pods {
		if responsible(pod, s.name) {
			key, _ := cache.MetaNamespaceKeyFunc(pod)
			s.loop.Add(key)
		}
	}
}

// errUnschedulable retries a Pod that fits no Node after a back-off.
var errUnschedulable = errors.New("pod fits no node")

// sync schedules the Pod key names and counts an attempt that failed.
func (s *Scheduler) sync(ctx context.Context, key string) error {
	retry, err := s.schedule(ctx, key)
	switch {
	case err != nil:
		s.attempts.WithLabelValues("error").Inc()
		return err
	case retry:
		return errUnschedulable
	}
	return nil
}

// schedule places one Pod. retry means it could not be placed and should
// be tried again after a backoff.
func (s *Scheduler) schedule(ctx context.Context, key string) (retry bool, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return false, nil
	}
	pod, err := s.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !responsible(pod, s.name) {
		return false, nil
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return false, err
	}

	s.mu.Lock()
	if a, ok := s.assumed[key]; ok && a.uid == pod.UID {
		// Bound already; the cache has not caught up.
		s.mu.Unlock()
		return false, nil
	}
	node, msg := pick(pod, nodes, s.countLocked(nodes))
	if node != "" {
		s.assumed[key] = assumed{uid: pod.UID, node: node}
	}
	s.mu.Unlock()

	if node == "" {
		s.attempts.WithLabelValues("unschedulable").Inc()
		if err := s.unschedulable(ctx, pod, msg); err != nil {
			klog.FromContext(ctx).V(2).Info("Recording unschedulable pod failed", "pod", key, "err", err)
		}
		return true, nil
	}
	// The bind goes on while the next Pod is placed, as upstream's binding
	// cycle does: the choice is already assumed, so a worker waiting on the
	// API server's answer would only slow the placing of the rest.
	s.binds.Go(func() { s.bind(ctx, key, pod, node) })
	return false, nil
}

// bind binds pod to node. A failed bind drops the assumption and tries the
// Pod again after the initial back-off.
func (s *Scheduler) bind(ctx context.Context, key string, pod *corev1.Pod, node string) {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		s.forget(key)
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		s.attempts.WithLabelValues("error").Inc()
		klog.FromContext(ctx).Error(err, "Binding pod failed", "pod", key, "node", node)
		s.loop.AddAfter(key, initialBackoff)
		return
	}
	s.attempts.WithLabelValues("scheduled").Inc()
	s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", key, node)
	klog.FromContext(ctx).V(2).Info("Bound pod", "pod", key, "node", node)
}

// countLocked counts the non-terminal Pods bound to each of nodes, the
// binds not yet in the cache included. s.mu must be held.
func (s *Scheduler) countLocked(nodes []*corev1.Node) map[string]int {
	count := map[string]int{}
	for _, n := range nodes {
		pods, _ := s.byNode.On(n.Name)
		for _, p := range pods {
			if !terminal(p) {
				count[n.Name]++
			}
		}
	}
	for _, a := range s.assumed {
		count[a.node]++
	}
	return count
}

// unschedulable reports that pod fits nowhere: a FailedScheduling Event
// and, if not so already, PodScheduled False with reason Unschedulable.
func (s *Scheduler) unschedulable(ctx context.Context, pod *corev1.Pod, msg string) error {
	s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", msg)
	cond := corev1.PodCondition{
		Type:    corev1.PodScheduled,
		Status:  corev1.ConditionFalse,
		Reason:  corev1.PodReasonUnschedulable,
		Message: msg,
	}
	out := pod.DeepCopy()
	i := -1
	for j, c := range out.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			i = j
		}
	}
	switch {
	case i < 0:
		cond.LastTransitionTime = metav1.Now()
		out.Status.Conditions = append(out.Status.Conditions, cond)
	default:
		old := out.Status.Conditions[i]
		if old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
			return nil
		}
		cond.LastTransitionTime = old.LastTransitionTime
		if old.Status != cond.Status {
			cond.LastTransitionTime = metav1.Now()
		}
		out.Status.Conditions[i] = cond
	}
	if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set pod %s/%s unschedulable: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
