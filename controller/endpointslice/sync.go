package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// errNodeNotFound is returned after a sync that left Pods out because
// their Node is unknown, so that the Service is retried.
var errNodeNotFound = errors.New("node not found")

// sync brings the slices of the Service named by key in line with the
// caches. What caused the sync doesn't matter; only the current state does.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	eventTime := c.takePending(key)
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		err = c.syncGone(ctx, key, ns, name)
	case err != nil:
	case svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.Selector == nil:
		err = c.syncNoSelector(ctx, key, svc)
	default:
		err = c.syncService(ctx, key, svc, eventTime)
	}
	if err != nil {
		c.restorePending(key, eventTime)
	}
	return err
}

// syncGone deletes the slices of a Service that no longer exists. (Upstream
// leaves this to the garbage collector through the owner reference.)
func (c *Controller) syncGone(ctx context.Context, key, ns, name string) error {
	c.triggers.forget(key)
	c.pace.Forget(key)
	c.metrics.setDesired(key, -1)
	existing, err := c.managedSlices(ns, name)
	if err != nil {
		return err
	}
	// Only slices a Service owned: an ownerless one (the kubernetes
	// Service's, kept by the API server) is not ours to delete.
	owned := existing[:0:0]
	for _, sl := range existing {
		for _, ref := range sl.OwnerReferences {
			if ref.Kind == "Service" {
				owned = append(owned, sl)
				break
			}
		}
	}
	existing = owned
	// The tracker keeps the deletions until their events arrive, so that
	// those events are known as ours.
	return c.deleteSlices(ctx, key, existing)
}

// syncNoSelector removes the slices this controller wrote for a Service
// that no longer selects Pods (now ExternalName or selector-less, whose
// endpoints, if any, someone else manages). Upstream leaves them in place.
// Only slices owned by the Service go: the API server keeps the kubernetes
// Service's slice under this controller's label, without an owner.
func (c *Controller) syncNoSelector(ctx context.Context, key string, svc *corev1.Service) error {
	c.metrics.setDesired(key, 0)
	existing, err := c.managedSlices(svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	owned := existing[:0:0]
	for _, sl := range existing {
		for _, ref := range sl.OwnerReferences {
			if ref.UID == svc.UID {
				owned = append(owned, sl)
				break
			}
		}
	}
	return c.deleteSlices(ctx, key, owned)
}

// syncService reconciles a Service with a selector.
func (c *Controller) syncService(ctx context.Context, key string, svc *corev1.Service, eventTime time.Time) error {
	pods, err := c.pods.Pods(svc.Namespace).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return err
	}
	existing, err := c.managedSlices(svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	if c.tracker.stale(key, existing) {
		return errStale
	}
	nodes, err := c.topology()
	if err != nil {
		return err
	}
	triggerTime, seen := c.triggers.compute(key, svc, pods)
	if triggerTime.IsZero() {
		triggerTime = eventTime
	}
	p := reconcile(reconcileInput{
		service: svc, pods: pods, nodes: nodes, slices: existing,
		maxEndpoints: c.maxEndpoints, triggerTime: triggerTime,
	})
	if len(p.hintsOff) > 0 && autoHintsEnabled(svc.Annotations) {
		klog.FromContext(ctx).V(2).Info("Topology hints withheld", "service", key, "reasons", p.hintsOff)
	}
	if err := c.apply(ctx, key, svc, p); err != nil {
		return err
	}
	c.triggers.commit(key, seen)
	c.metrics.setDesired(key, p.desired)
	if len(p.missingNodes) > 0 {
		return fmt.Errorf("%w: left out pods %v of service %s", errNodeNotFound, p.missingNodes, key)
	}
	return nil
}

// managedSlices lists the cached slices labelled for the Service and
// managed by this controller, without those already being deleted.
func (c *Controller) managedSlices(ns, name string) ([]*discovery.EndpointSlice, error) {
	sel := labels.Set{discovery.LabelServiceName: name, discovery.LabelManagedBy: ControllerName}.AsSelectorPreValidated()
	all, err := c.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return nil, err
	}
	out := all[:0:0]
	for _, s := range all {
		if s.DeletionTimestamp == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// apply makes the plan's writes: creates first, deletes last, so that an
// endpoint moving between slices is never missing from all of them.
func (c *Controller) apply(ctx context.Context, key string, svc *corev1.Service, p plan) error {
	api := c.client.DiscoveryV1().EndpointSlices(svc.Namespace)
	// No new slices for a Service being deleted: the garbage collector
	// would race to delete them.
	if svc.DeletionTimestamp == nil {
		for _, s := range p.create {
			got, err := api.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("create EndpointSlice for service %s: %w", key, err)
			}
			c.tracker.wrote(key, got)
			c.metrics.changes.WithLabelValues("create").Inc()
		}
	}
	for _, s := range p.update {
		got, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update EndpointSlice %s for service %s: %w", s.Name, key, err)
		}
		c.tracker.wrote(key, got)
		c.metrics.changes.WithLabelValues("update").Inc()
	}
	if n := len(p.create) + len(p.update) + len(p.delete); n > 0 {
		klog.FromContext(ctx).V(4).Info("Writing EndpointSlices", "service", key,
			"created", len(p.create), "updated", len(p.update), "deleted", len(p.delete))
	}
	return c.deleteSlices(ctx, key, p.delete)
}

// deleteSlices deletes slices; one already gone counts as deleted.
func (c *Controller) deleteSlices(ctx context.Context, key string, list []*discovery.EndpointSlice) error {
	for _, s := range list {
		opts := metav1.DeleteOptions{}
		if s.UID != "" {
			// Never delete a slice that replaced the one we looked at.
			opts.Preconditions = metav1.NewUIDPreconditions(string(s.UID))
		}
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, opts)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("delete EndpointSlice %s for service %s: %w", s.Name, key, err)
		default:
			c.metrics.changes.WithLabelValues("delete").Inc()
		}
		c.tracker.deleted(key, s)
	}
	return nil
}
