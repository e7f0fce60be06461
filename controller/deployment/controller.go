package deployment

import (
	"context"
	"fmt"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

const controllerName = "deployment-controller"

// kind is the kind of the ownerReferences the controller writes.
var kind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Options configure a Controller. The zero value is ready to use.
type Options struct {
	// Registerer receives the controller's Prometheus metrics while it
	// runs; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Clock stamps conditions and tells the progress deadline; nil is
	// the real clock.
	Clock clock.PassiveClock
}

// Controller rolls Deployments out through ReplicaSets. Build it with
// New, start the informer factory, then Run it.
type Controller struct {
	client      kubernetes.Interface
	recorder    record.EventRecorder
	clock       clock.PassiveClock
	deployments appslisters.DeploymentLister
	replicaSets *workload.ByController[*appsv1.ReplicaSet]
	rsLister    appslisters.ReplicaSetLister
	pods        *workload.ByController[*corev1.Pod]
	loop        *loop.Loop[string]
}

// New returns a controller that reads Deployments, ReplicaSets and Pods
// through factory, writes through client and records Events with
// recorder. It registers its informers on factory, so start the factory
// after New.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, opts Options) *Controller {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	dInf := factory.Apps().V1().Deployments()
	rsInf := factory.Apps().V1().ReplicaSets()
	podInf := factory.Core().V1().Pods().Informer()
	c := &Controller{
		client:      client,
		recorder:    recorder,
		clock:       clk,
		deployments: dInf.Lister(),
		replicaSets: workload.NewByController[*appsv1.ReplicaSet](rsInf.Informer()),
		rsLister:    rsInf.Lister(),
		pods:        workload.NewByController[*corev1.Pod](podInf),
	}
	c.loop = loop.New(loop.Config[string]{
		Name:      controllerName,
		QueueName: "deployment",
		Sync:      c.sync,
	})
	c.loop.Collect(opts.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Subsystem: "deployment_controller",
		Name:      "queue_depth",
		Help:      "Deployments waiting in the deployment controller's queue.",
	}, func() float64 { return float64(c.loop.Len()) }))
	c.loop.WatchOrLog(dInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	})
	c.loop.WatchOrLog(rsInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onReplicaSetAdd,
		UpdateFunc: c.onReplicaSetUpdate,
		DeleteFunc: c.onReplicaSetDelete,
	})
	c.loop.WatchOrLog(podInf, cache.ResourceEventHandlerFuncs{DeleteFunc: c.onPodDelete})
	return c
}

// Run syncs with the given number of workers until ctx ends, then stops
// every goroutine it started, removes its event handlers and returns.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers)
}

// sync moves one Deployment's rollout on as far as its strategy allows
// and writes its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return nil
	}
	cached, err := c.deployments.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get deployment %s: %w", key, err)
	}
	d := cached.DeepCopy()
	if reflect.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		c.recorder.Eventf(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			return c.updateStatus(ctx, d)
		}
		return nil
	}
	rss, err := c.claimReplicaSets(ctx, d)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rss)
	}
	if err := c.checkPaused(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.syncScale(ctx, d, rss)
	}
	scaling, err := c.isScalingEvent(ctx, d, rss)
	if err != nil {
		return err
	}
	if scaling {
		return c.syncScale(ctx, d, rss)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return c.rolloutRecreate(ctx, d, rss)
	}
	return c.rolloutRolling(ctx, d, rss)
}

// claimReplicaSets returns the ReplicaSets d owns once orphans matching
// its selector are adopted and owned ones that no longer match are
// released.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid selector: %w", d.Namespace, d.Name, err)
	}
	candidates, err := c.replicaSets.Candidates(d.Namespace, d.UID)
	if err != nil {
		return nil, fmt.Errorf("list replicasets of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	claimer := &workload.Claimer[*appsv1.ReplicaSet]{
		Owner:    d,
		Kind:     kind,
		Selector: selector,
		Recheck: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		},
		Patch: workload.PatchReplicaSet(c.client),
	}
	rss, err := claimer.Claim(ctx, candidates)
	// The cache's objects are shared: work on copies.
	out := make([]*appsv1.ReplicaSet, len(rss))
	for i, rs := range rss {
		out[i] = rs.DeepCopy()
	}
	return out, err
}

// updateStatus writes d's status, and its annotations, which the status
// subresource takes as upstream's does for the revision annotation. It
// keeps d at the written version, so that the sync's next write does not
// conflict with its own last one.
func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment) error {
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	*d = *updated
	return nil
}

// ownerKey returns the key of the Deployment a controller reference
// names, if the cache knows one under that UID.
func (c *Controller) ownerKey(namespace string, ref *metav1.OwnerReference) (string, bool) {
	if ref == nil || ref.Kind != kind.Kind || ref.APIVersion != kind.GroupVersion().String() {
		return "", false
	}
	d, err := c.deployments.Deployments(namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return "", false
	}
	return namespace + "/" + ref.Name, true
}

// rsOwnerUID returns the UID of the ReplicaSet that controls pod.
func rsOwnerUID(pod *corev1.Pod) (types.UID, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return "", false
	}
	return ref.UID, true
}
