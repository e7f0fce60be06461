package daemonset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// claimPods returns the Pods ds controls, adopting orphans its selector
// matches, as upstream's controller ref manager does. Pods controlled by
// something else are never touched.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.pods.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range all {
		ref := metav1.GetControllerOf(p)
		switch {
		case ref != nil && ref.UID == ds.UID:
			out = append(out, p)
		case ref == nil && p.DeletionTimestamp == nil && selector.Matches(labels.Set(p.Labels)):
			adopted, err := c.adopt(ctx, ds, p)
			if err != nil {
				logger(ctx).V(2).Info("Adopting pod failed", "pod", podKey(p), "err", err)
				continue
			}
			out = append(out, adopted)
		}
	}
	return out, nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// adopt makes ds the controller of the orphan pod, guarded by its UID so a
// Pod recreated under the same name is not taken by mistake.
func (c *Controller) adopt(ctx context.Context, ds *appsv1.DaemonSet, pod *corev1.Pod) (*corev1.Pod, error) {
	ref := metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{*ref},
		"uid":             pod.UID,
	}})
	if err != nil {
		return nil, err
	}
	return c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
}

// newPod returns ds's Pod for nodeName at the template hash names.
func newPod(ds *appsv1.DaemonSet, nodeName, hash string) *corev1.Pod {
	tmpl := &ds.Spec.Template
	annotations := make(map[string]string, len(tmpl.Annotations))
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ds.Name + "-",
			Namespace:       ds.Namespace,
			Labels:          withLabel(tmpl.Labels, appsv1.DefaultDaemonSetUniqueLabelKey, hash),
			Annotations:     annotations,
			Finalizers:      tmpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec: podSpecFor(ds, nodeName),
	}
}

// apply makes ch's creates and deletes, at most burstReplicas of each. The
// creates go in batches of 1, 2, 4, ... as upstream's slow start, so that a
// template the API server refuses fails once, not once per Node.
func (c *Controller) apply(ctx context.Context, key string, ds *appsv1.DaemonSet, ch changes, hash string) error {
	create, del := ch.create, ch.delete
	if len(create) > burstReplicas {
		create = create[:burstReplicas]
	}
	if len(del) > burstReplicas {
		del = del[:burstReplicas]
	}
	c.exp.expect(key, len(create), len(del))
	var errs []error
	for start, batch := 0, 1; start < len(create); start, batch = start+batch, batch*2 {
		end := min(start+batch, len(create))
		failed := c.parallel(create[start:end], func(node string) error { return c.createPod(ctx, key, ds, node, hash) })
		if len(failed) > 0 {
			errs = append(errs, failed...)
			// The rest are never made; stop expecting them.
			for range create[end:] {
				c.exp.observed(key, true)
			}
			break
		}
	}
	errs = append(errs, c.parallel(podNames(del), func(name string) error { return c.deletePod(ctx, key, ds, name) })...)
	return errors.Join(errs...)
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// parallel runs f on every item at once and returns the errors.
func (c *Controller) parallel(items []string, f func(string) error) []error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, it := range items {
		wg.Go(func() {
			if err := f(it); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

func (c *Controller) createPod(ctx context.Context, key string, ds *appsv1.DaemonSet, node, hash string) error {
	pod, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, newPod(ds, node, hash), metav1.CreateOptions{})
	if err != nil {
		c.exp.observed(key, true)
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the namespace is going; nothing to report
		}
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		return fmt.Errorf("create pod for daemonset %s on node %s: %w", key, node, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", pod.Name)
	return nil
}

func (c *Controller) deletePod(ctx context.Context, key string, ds *appsv1.DaemonSet, name string) error {
	err := c.client.CoreV1().Pods(ds.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		c.exp.observed(key, false)
		return nil
	}
	if err != nil {
		c.exp.observed(key, false)
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s/%s of daemonset %s: %w", ds.Namespace, name, key, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", name)
	return nil
}
