package replicaset

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"portal.dev/portal/controller/internal/workload"
	"portal.dev/portal/internal/loop"
)

const (
	controllerName = "replicaset-controller"

	// burstReplicas caps the Pods one sync creates or deletes, as
	// upstream, so one ReplicaSet scaled to thousands does not hold a
	// worker for minutes; the next sync does the rest.
	burstReplicas = 500
)

// kind is the kind of the ownerReferences the controller writes.
var kind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// Options configure a Controller. The zero value is ready to use.
type Options struct {
	// Registerer receives the controller's Prometheus metrics while it
	// runs; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Clock tells Pod availability and expectation age; nil is the real
	// clock.
	Clock clock.PassiveClock
}

// Controller keeps the Pods of ReplicaSets. Build it with New, start the
// informer factory, then Run it.
type Controller struct {
	client       kubernetes.Interface
	recorder     record.EventRecorder
	clock        clock.PassiveClock
	replicaSets  appslisters.ReplicaSetLister
	podEvents    workload.PodHandlers
	pods         *workload.ByController[*corev1.Pod]
	expectations *workload.Expectations
	loop         *loop.Loop[string]
}

// New returns a controller that reads ReplicaSets and Pods through factory,
// writes through client and records Events with recorder. It registers its
// informers on factory, so start the factory after New.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, opts Options) *Controller {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	rsInf := factory.Apps().V1().ReplicaSets()
	podInf := factory.Core().V1().Pods().Informer()
	c := &Controller{
		client:       client,
		recorder:     recorder,
		clock:        clk,
		replicaSets:  rsInf.Lister(),
		pods:         workload.NewByController[*corev1.Pod](podInf),
		expectations: &workload.Expectations{Clock: clk},
	}
	c.loop = loop.New(loop.Config[string]{
		Name:      controllerName,
		QueueName: "replicaset",
		Sync:      c.sync,
	})
	m := newMetrics(c.loop.Len)
	c.loop.Collect(opts.Registerer, m...)
	c.loop.WatchOrLog(rsInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.onReplicaSetUpdate,
		DeleteFunc: c.onReplicaSetDelete,
	})
	owners := workload.NewOwners(kind.Kind, rsInf.Lister().ReplicaSets,
		func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector })
	c.podEvents = owners.PodHandlers(c.loop.Add, c.expectations)
	c.podEvents.OwnedUpdate = c.checkAvailableLater
	c.loop.WatchOrLog(podInf, c.podEvents.Funcs())
	return c
}

// Run syncs with the given number of workers until ctx ends, then stops
// every goroutine it started, removes its event handlers and returns.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers)
}

// sync brings one ReplicaSet's Pods to spec.replicas and writes its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return nil
	}
	rs, err := c.replicaSets.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get replicaset %s: %w", key, err)
	}
	// Read before the Pods: an event that lands between the two reads
	// then shows in the Pods too, never the other way round.
	satisfied := c.expectations.Satisfied(key)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("replicaset %s has an invalid selector: %w", key, err))
		return nil // fixed only by a new spec, which queues the key again
	}
	pods, err := c.claimPods(ctx, rs, selector)
	if err != nil {
		return err
	}
	var manageErr error
	if satisfied && rs.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, key, rs, pods)
	}
	status := calculateStatus(rs, pods, manageErr, c.clock.Now())
	rs, err = c.updateStatus(ctx, rs, status)
	if err != nil {
		return err
	}
	if manageErr != nil {
		return manageErr
	}
	// Pods ready but not yet available become available minReadySeconds
	// later without any event; look again then.
	if rs.Spec.MinReadySeconds > 0 && rs.Status.ReadyReplicas == replicas(rs) &&
		rs.Status.AvailableReplicas != replicas(rs) {
		c.loop.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}

// claimPods returns the active Pods rs owns once orphans matching its
// selector are adopted and owned Pods that no longer match are released.
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, selector labels.Selector) ([]*corev1.Pod, error) {
	candidates, err := c.pods.Candidates(rs.Namespace, rs.UID)
	if err != nil {
		return nil, fmt.Errorf("list pods of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	claimer := &workload.Claimer[*corev1.Pod]{
		Owner:    rs,
		Kind:     kind,
		Selector: selector,
		Recheck: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		},
		Patch: workload.PatchPod(c.client),
	}
	// Terminal and terminating Pods are neither adopted nor counted, as
	// upstream: they will not run again.
	return claimer.Claim(ctx, workload.FilterActive(candidates))
}
