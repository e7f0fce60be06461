package serviceaccount

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/loop"
)

// DefaultName is the ServiceAccount every namespace gets.
const DefaultName = "default"

// Controller keeps a "default" ServiceAccount in every active namespace.
type Controller struct {
	client     kubernetes.Interface
	factory    informers.SharedInformerFactory
	namespaces corelisters.NamespaceLister
	accounts   corelisters.ServiceAccountLister
	loop       *loop.Loop[string]
}

// New returns a controller that writes through client and reads
// Namespaces and ServiceAccounts from factory's informers. Its keys are
// namespace names.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	nsInf, saInf := factory.Core().V1().Namespaces(), factory.Core().V1().ServiceAccounts()
	c := &Controller{
		client:     client,
		factory:    factory,
		namespaces: nsInf.Lister(),
		accounts:   saInf.Lister(),
	}
	c.loop = loop.New(loop.Config[string]{
		Name:      "serviceaccount",
		QueueName: "serviceaccount",
		Sync:      c.sync,
	})
	c.loop.WaitFor(nsInf.Informer().HasSynced, saInf.Informer().HasSynced)
	c.loop.WatchOrLog(nsInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.queueNamespace(obj) },
		UpdateFunc: func(_, obj any) { c.queueNamespace(obj) },
	})
	c.loop.WatchOrLog(saInf.Informer(), cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.queueAccount,
	})
	return c
}

// Run starts the informers that are not running yet, waits for their
// caches and syncs with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	c.loop.Run(ctx, workers)
}

func (c *Controller) queueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.loop.Add(ns.Name)
	}
}

// queueAccount looks at the namespace of a deleted "default" account.
func (c *Controller) queueAccount(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if sa, ok := obj.(*corev1.ServiceAccount); ok && sa.Name == DefaultName {
		c.loop.Add(sa.Namespace)
	}
}

// sync creates namespace's "default" ServiceAccount if the namespace is
// active and the cache holds no such account.
func (c *Controller) sync(ctx context.Context, namespace string) error {
	ns, err := c.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return nil
	}
	if _, err := c.accounts.ServiceAccounts(namespace).Get(DefaultName); err == nil {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: DefaultName}}
	_, err = c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace began terminating after the cache saw it.
		return nil
	case err != nil:
		return fmt.Errorf("create default service account in %s: %w", namespace, err)
	}
	klog.FromContext(ctx).V(2).Info("Created service account", "serviceAccount", klog.KRef(namespace, DefaultName))
	return nil
}
