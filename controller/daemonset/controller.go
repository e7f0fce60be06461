package daemonset

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"portal.dev/portal/controller/internal/workload"
	"portal.dev/portal/internal/loop"
)

const (
	controllerName = "daemonset"

	// burstReplicas caps the Pods one sync creates or deletes, as upstream.
	burstReplicas = 250

	// Upstream's back-off for replacing a failed daemon Pod on a Node, so
	// that a Pod the Node keeps rejecting is not recreated in a hot loop.
	failedBackoffInitial = time.Second
	failedBackoffMax     = 15 * time.Minute
)

// Event reasons, as upstream's.
const (
	reasonSelectingAll    = "SelectingAll"
	reasonFailedDaemonPod = "FailedDaemonPod"
)

// Options configure a Controller. The zero value is ready to use.
type Options struct {
	// Clock tells Pod availability, rolling-update progress and
	// expectation age; nil is the real clock.
	Clock clock.PassiveClock
}

// Controller keeps DaemonSets' Pods on their Nodes. Build it with New,
// then Run it.
type Controller struct {
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	recorder  record.EventRecorder
	sets      appslisters.DaemonSetLister
	owners    workload.Owners[*appsv1.DaemonSet]
	podEvents workload.PodHandlers
	revisions appslisters.ControllerRevisionLister
	// podsOf returns the Pods a DaemonSet controls and the orphans in its
	// namespace, the candidates for claiming.
	podsOf func(namespace string, uid types.UID) ([]*corev1.Pod, error)
	clock  clock.PassiveClock
	nodes  corelisters.NodeLister
	loop   *loop.Loop[string]
	exp    workload.Expectations
	failed *flowcontrol.Backoff
}

// New returns a controller that reads DaemonSets, ControllerRevisions,
// Pods and Nodes through factory, writes through client and records Events
// through recorder. It adds its event handlers and its Pod index now; Run
// starts the work.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, opts Options) *Controller {
	apps, core := factory.Apps().V1(), factory.Core().V1()
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Controller{
		clock:     clk,
		exp:       workload.Expectations{Clock: clk},
		podsOf:    workload.NewByController[*corev1.Pod](core.Pods().Informer()).Candidates,
		client:    client,
		factory:   factory,
		recorder:  recorder,
		sets:      apps.DaemonSets().Lister(),
		revisions: apps.ControllerRevisions().Lister(),
		nodes:     core.Nodes().Lister(),
		failed:    flowcontrol.NewBackOff(failedBackoffInitial, failedBackoffMax),
	}
	c.loop = loop.New(loop.Config[string]{
		Name:           controllerName,
		Sync:           c.sync,
		ReportFailures: true,
		Background:     []func(context.Context){c.gcBackoff},
	})
	c.owners = workload.NewOwners(kind.Kind, c.sets.DaemonSets,
		func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector })
	c.podEvents = c.owners.PodHandlers(c.loop.Add, &c.exp)
	c.watchHandlers(apps.DaemonSets().Informer(), apps.ControllerRevisions().Informer(),
		core.Pods().Informer(), core.Nodes().Informer())
	return c
}

// Run starts the factory's informers that are not running yet, waits for
// their caches and syncs with workers goroutines until ctx ends. It returns
// after every goroutine it started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	c.loop.Run(ctx, workers)
}

// gcBackoff forgets failed-Pod back-offs that have expired, as upstream
// does every minute.
func (c *Controller) gcBackoff(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.failed.GC()
		}
	}
}

// sync brings one DaemonSet's Pods, revisions and status to what its spec
// and the Nodes say.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ds, err := c.sets.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || selector.Empty() {
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonSelectingAll,
			"This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	if ds.DeletionTimestamp != nil {
		return nil // the garbage collector removes its Pods
	}
	// Read before the Pods: an event that lands between the two reads
	// then shows in the Pods too, never the other way round.
	satisfied := c.exp.Satisfied(key)
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, ds, selector)
	if err != nil {
		return err
	}
	revs, err := c.claimRevisions(ctx, ds, selector)
	if err != nil {
		return err
	}
	h, hash, err := c.syncHistory(ctx, ds, revs)
	if err != nil {
		return err
	}
	byNode := groupByNode(pods)
	var updateErr error
	if satisfied {
		updateErr = c.update(ctx, key, ds, nodes, byNode, hash)
	}
	// Pods that failed to be made or removed leave the rest to do: the
	// history and status still say what the Nodes run now.
	return errors.Join(updateErr,
		c.cleanupHistory(ctx, ds, h, pods),
		c.writeStatus(ctx, key, ds, nodes, byNode, hash))
}

// update makes the Pods manage asks for and, when there are none and the
// strategy is RollingUpdate, those the rolling update asks for.
func (c *Controller) update(ctx context.Context, key string, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string) error {
	ch := manage(ds, nodes, byNode, hash, func(ds *appsv1.DaemonSet, pod *corev1.Pod, node string) bool {
		return c.replaceFailed(key, ds, pod, node)
	})
	if len(ch.create) == 0 && len(ch.delete) == 0 && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		ch = rollingUpdate(ds, nodes, byNode, hash, c.clock.Now())
	}
	return c.apply(ctx, key, ds, ch, hash)
}

// replaceFailed reports whether a failed Pod on node is deleted now; within
// its back-off it stays, and the DaemonSet is synced again when the
// back-off ends.
func (c *Controller) replaceFailed(key string, ds *appsv1.DaemonSet, pod *corev1.Pod, node string) bool {
	id := fmt.Sprintf("%s/%d/%s", ds.UID, ds.Status.ObservedGeneration, node)
	now := c.failed.Clock.Now()
	if c.failed.IsInBackOffSinceUpdate(id, now) {
		c.loop.AddAfter(key, c.failed.Get(id))
		return false
	}
	c.failed.Next(id, now)
	c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDaemonPod,
		"Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node)
	return true
}

// groupByNode maps each Node name to the daemon Pods for it, leaving out
// finished Pods on their way out.
func groupByNode(pods []*corev1.Pod) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) {
			continue
		}
		if n := targetNode(p); n != "" {
			out[n] = append(out[n], p)
		}
	}
	return out
}

// writeStatus writes ds's status if it changed, and syncs again when a
// Ready Pod will have been Ready for minReadySeconds.
func (c *Controller) writeStatus(ctx context.Context, key string, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string) error {
	st := computeStatus(ds, nodes, byNode, hash, c.clock.Now())
	if !equality.Semantic.DeepEqual(st, ds.Status) {
		up := ds.DeepCopy()
		up.Status = st
		if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status of daemonset %s: %w", key, err)
		}
	}
	if ds.Spec.MinReadySeconds > 0 && st.NumberReady != st.NumberAvailable {
		c.loop.AddAfter(key, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}
