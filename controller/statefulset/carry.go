package statefulset

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/controller/internal/workload"
	"portal.dev/portal/internal/loop"
)

// carryOut deletes, creates and fixes the pods res names, recording an
// Event for each as upstream does.
func (c *Controller) carryOut(ctx context.Context, set *appsv1.StatefulSet, res Result) error {
	return errors.Join(c.deletePods(ctx, set, res.Delete), c.createPods(ctx, set, res.Create), c.fixPods(ctx, set, res.Fix))
}

func (c *Controller) deletePods(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod) error {
	var errs []error
	api := c.client.CoreV1().Pods(set.Namespace)
	for _, pod := range pods {
		uid := pod.UID
		err := api.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // already gone, or a newer pod has the name
		}
		c.podEvent(set, pod, "delete", err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// createPods creates pods in slow-start batches, as upstream creates the
// pods of a Parallel set: a template the API server refuses costs one
// failed create, not one per pod.
func (c *Controller) createPods(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod) error {
	api := c.client.CoreV1().Pods(set.Namespace)
	_, err := workload.SlowStart(ctx, len(pods), func(ctx context.Context, i int) error {
		pod := pods[i]
		_, err := api.Create(ctx, pod, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			// The cache has not seen the pod yet, or the last one of
			// that name is still terminating.
			return loop.RetryAfter(recheck, fmt.Errorf("pod %s/%s still exists", pod.Namespace, pod.Name))
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			return nil // creates keep failing until the namespace is gone
		}
		c.podEvent(set, pod, "create", err)
		return err
	})
	return err
}

func (c *Controller) fixPods(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod) error {
	var errs []error
	api := c.client.CoreV1().Pods(set.Namespace)
	for _, pod := range pods {
		_, err := api.Update(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		c.podEvent(set, pod, "update", err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// podEvent records what happened to pod with upstream's reasons and
// messages ("create Pod web-0 in StatefulSet web successful").
func (c *Controller) podEvent(set *appsv1.StatefulSet, pod *corev1.Pod, verb string, err error) {
	title := strings.ToUpper(verb[:1]) + verb[1:]
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "Successful"+title,
			"%s Pod %s in StatefulSet %s successful", verb, pod.Name, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "Failed"+title,
		"%s Pod %s in StatefulSet %s failed error: %s", verb, pod.Name, set.Name, err)
}
