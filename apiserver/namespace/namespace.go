// Package namespace empties namespaces that are being deleted and then lets
// them go: for a Terminating namespace it deletes every namespaced object
// in it, waits until none is left, clears the "kubernetes" finalizer through
// the finalize subresource and deletes the namespace again. While it waits,
// the namespace's status conditions say what remains and why, with
// upstream's condition types, reasons and messages (conditions.go).
//
// It is part of the API server, which starts it in a post-start hook with
// its loopback client, since the "kubernetes" finalizer the registry puts
// on every namespace is the API server's to clear. It talks only to the
// API, so every API server sharing an etcd may run a copy.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Controller finalizes terminating namespaces.
type Controller struct {
	client kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[string]
	// clock stamps the conditions' transition times; tests set a fake.
	clock clock.PassiveClock
}

// New returns a controller using client.
func New(client kubernetes.Interface) *Controller {
	return &Controller{
		client: client,
		clock:  clock.RealClock{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
	}
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	factory := informers.NewSharedInformerFactory(c.client, 5*time.Minute)
	inf := factory.Core().V1().Namespaces().Informer()
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	go wait.UntilWithContext(ctx, c.work, time.Second)
	<-ctx.Done()
}

func (c *Controller) work(ctx context.Context) {
	for {
		name, quit := c.queue.Get()
		if quit {
			return
		}
		err := c.sync(ctx, name)
		switch {
		case err == nil:
			c.queue.Forget(name)
		case errRemaining{}.is(err):
			c.queue.AddRateLimited(name)
		default:
			klog.ErrorS(err, "Finalizing namespace", "namespace", name)
			c.queue.AddRateLimited(name)
		}
		c.queue.Done(name)
	}
}

// errRemaining says objects are left; the namespace is tried again soon.
type errRemaining struct{ n int }

func (e errRemaining) Error() string { return fmt.Sprintf("%d objects remaining", e.n) }
func (errRemaining) is(err error) bool {
	_, ok := err.(errRemaining)
	return ok
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	if slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		left := c.deleteContent(ctx, name)
		// The namespace's conditions say what blocks it, as upstream's do:
		// without them a namespace stuck Terminating gives no reason.
		if ns, err = c.updateConditions(ctx, ns, left); err != nil {
			return err
		}
		if len(left.failed) > 0 {
			return errors.Join(left.failed...)
		}
		if n := left.count(); n > 0 {
			return errRemaining{n}
		}
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool {
			return f == corev1.FinalizerKubernetes
		})
		if ns, err = c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if len(ns.Spec.Finalizers) > 0 {
		return nil // someone else's finalizer; their update requeues us
	}
	err = c.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// deleteContent issues a delete-collection for every namespaced resource
// and returns what is still there. A resource that fails does not stop
// the others, as upstream's does not.
func (c *Controller) deleteContent(ctx context.Context, ns string) *remaining {
	left := &remaining{}
	for _, r := range namespacedResources {
		if err := r.deleteAll(ctx, c.client, ns, left); err != nil {
			left.failed = append(left.failed, fmt.Errorf("delete %s in %s: %w", r.name, ns, err))
		}
	}
	return left
}

// updateConditions writes left's conditions to ns's status when they
// changed, and returns the namespace as stored.
func (c *Controller) updateConditions(ctx context.Context, ns *corev1.Namespace, left *remaining) (*corev1.Namespace, error) {
	ns = ns.DeepCopy()
	if !setConditions(&ns.Status, left, metav1.NewTime(c.clock.Now())) {
		return ns, nil
	}
	return c.client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
}
