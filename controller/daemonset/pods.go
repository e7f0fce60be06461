package daemonset

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/controller/internal/workload"
)

// kind is what the DaemonSet's ownerReferences name.
var kind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// recheck re-reads ds from the API server, for the toolkit's claimers to
// confirm it before adopting anything.
func (c *Controller) recheck(ds *appsv1.DaemonSet) func(context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	}
}

// claimPods returns the Pods ds controls, adopting orphans its selector
// matches and releasing those it no longer matches, as upstream.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.pods.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	cl := &workload.Claimer[*corev1.Pod]{
		Owner: ds, Kind: kind, Selector: selector,
		Recheck: c.recheck(ds), Patch: workload.PatchPod(c.client),
	}
	return cl.Claim(ctx, all)
}

// newPod returns ds's Pod for nodeName at the template hash names.
func newPod(ds *appsv1.DaemonSet, nodeName, hash string) *corev1.Pod {
	pod := workload.PodFromTemplate(&ds.Spec.Template, ds, kind, "")
	pod.Labels = withLabel(pod.Labels, workload.RevisionHashLabel, hash)
	if gen := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; gen != "" {
		pod.Labels[templateGenerationLabel] = gen
	}
	pod.Spec = podSpecFor(ds, nodeName)
	return pod
}

// apply makes ch's creates and deletes, at most burstReplicas of each,
// creating in the toolkit's slow-start batches so that a template the API
// server refuses fails once, not once per Node.
func (c *Controller) apply(ctx context.Context, key string, ds *appsv1.DaemonSet, ch changes, hash string) error {
	create, del := ch.create, ch.delete
	if len(create) > burstReplicas {
		create = create[:burstReplicas]
	}
	if len(del) > burstReplicas {
		del = del[:burstReplicas]
	}
	uids := make([]types.UID, len(del))
	for i, p := range del {
		uids[i] = p.UID
	}
	c.exp.Expect(key, len(create), uids)
	made, createErr := workload.SlowStart(ctx, len(create), func(ctx context.Context, i int) error {
		return c.createPod(ctx, key, ds, create[i], hash)
	})
	// Creates that failed or were never tried will never be observed;
	// createPod leaves them to this one count.
	for range len(create) - made {
		c.exp.CreationObserved(key)
	}
	var mu sync.Mutex
	errs := []error{createErr}
	var wg sync.WaitGroup
	for _, p := range del {
		wg.Go(func() {
			if err := c.deletePod(ctx, key, ds, p); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createPod creates ds's Pod for node. A create that fails is left to
// apply, which takes every create that did not succeed off the
// expectations at once.
func (c *Controller) createPod(ctx context.Context, key string, ds *appsv1.DaemonSet, node, hash string) error {
	pod, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, newPod(ds, node, hash), metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going; nothing to report. Counted as made
			// by apply, so taken off the expectations here.
			c.exp.CreationObserved(key)
			return nil
		}
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		return fmt.Errorf("create pod for daemonset %s on node %s: %w", key, node, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", pod.Name)
	return nil
}

// deletePod deletes one of ds's Pods, guarded by its UID.
func (c *Controller) deletePod(ctx context.Context, key string, ds *appsv1.DaemonSet, pod *corev1.Pod) error {
	err := c.client.CoreV1().Pods(ds.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		c.exp.DeletionObserved(key, pod.UID) // gone already
		return nil
	case err != nil:
		c.exp.DeletionObserved(key, pod.UID)
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s/%s of daemonset %s: %w", ds.Namespace, pod.Name, key, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", pod.Name)
	return nil
}
