package mirroring

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// apply makes the writes of a plan: creates, then updates, then deletes,
// stopping at the first error (the key is retried as a whole).
func (c *Controller) apply(ctx context.Context, key string, ep *corev1.Endpoints, p Plan) error {
	api := c.client.DiscoveryV1().EndpointSlices(ep.Namespace)
	// An Endpoints on its way out gets no new slices.
	if ep.DeletionTimestamp == nil {
		for _, s := range p.Create {
			created, err := api.Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil // creates keep failing until the namespace is gone
			}
			if err != nil {
				return fmt.Errorf("create endpointslice for endpoints %s: %w", key, err)
			}
			c.creations.expect(key, created.Name, time.Now())
			c.metrics.changes.WithLabelValues("create").Inc()
		}
	}
	for _, s := range p.Update {
		if _, err := api.Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("update endpointslice %s for endpoints %s: %w", s.Name, key, err)
		}
		c.metrics.changes.WithLabelValues("update").Inc()
	}
	if err := c.deleteSlices(ctx, key, p.Delete); err != nil {
		return err
	}
	if !p.Empty() {
		klog.FromContext(ctx).V(4).Info("Mirrored endpoints", "endpoints", klog.KObj(ep),
			"created", len(p.Create), "updated", len(p.Update), "deleted", len(p.Delete))
	}
	return nil
}

// deleteMirrored removes every slice mirrored for key.
func (c *Controller) deleteMirrored(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	existing, err := c.mirrored(ns, name)
	if err != nil {
		return err
	}
	c.creations.forget(key)
	return c.deleteSlices(ctx, key, existing)
}

func (c *Controller) deleteSlices(ctx context.Context, key string, list []*discoveryv1.EndpointSlice) error {
	for _, s := range list {
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete endpointslice %s for endpoints %s: %w", s.Name, key, err)
		}
		c.metrics.changes.WithLabelValues("delete").Inc()
	}
	return nil
}
