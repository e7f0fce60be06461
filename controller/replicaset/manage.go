package replicaset

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
	"k8s.io/klog/v2"

	"portal.dev/portal/controller/internal/workload"
)

// manage creates or deletes Pods so that rs has spec.replicas active
// ones, at most burstReplicas per call.
func (c *Controller) manage(ctx context.Context, key string, rs *appsv1.ReplicaSet, pods []*corev1.Pod) error {
	diff := len(pods) - int(replicas(rs))
	switch {
	case diff < 0:
		return c.createPods(ctx, key, rs, min(-diff, burstReplicas))
	case diff > 0:
		return c.deletePods(ctx, key, rs, pods, min(diff, burstReplicas))
	}
	return nil
}

// createPods creates n Pods in slow-start batches. Expectations are raised
// first, so that the informer's add events, however late, are counted
// against them and a sync in between never creates the same Pods again;
// the creates that failed, or were never tried, will never be seen and
// are taken off at once.
func (c *Controller) createPods(ctx context.Context, key string, rs *appsv1.ReplicaSet, n int) error {
	c.expectations.ExpectCreations(key, n)
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Too few replicas", "replicaSet", klog.KObj(rs), "need", replicas(rs), "creating", n)
	var mu sync.Mutex
	pending := 0 // creates whose Pod may still show up
	ok, err := workload.SlowStart(ctx, n, func(ctx context.Context, _ int) error {
		pod := workload.PodFromTemplate(&rs.Spec.Template, rs, kind, "")
		created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
			return nil
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			return nil // every create fails until the namespace is gone; nothing to report
		case timedOut(err):
			// The Pod may have been created all the same: keep expecting
			// it, or the next sync could create one too many. If it was
			// not, the expectation lapses after its timeout.
			mu.Lock()
			pending++
			mu.Unlock()
		}
		c.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return err
	})
	if err != nil {
		for range n - ok - pending {
			c.expectations.CreationObserved(key)
		}
		return fmt.Errorf("create pods for replicaset %s: %w", key, err)
	}
	return nil
}

// deletePods deletes the n Pods upstream would delete first. Expectations
// list their UIDs, so that a Pod seen going twice (marked for deletion,
// then gone) counts once; a delete that failed is taken off at once.
func (c *Controller) deletePods(ctx context.Context, key string, rs *appsv1.ReplicaSet, pods []*corev1.Pod, n int) error {
	victims := append([]*corev1.Pod(nil), pods...)
	workload.RankForDeletion(victims, c.relatedPods(rs, pods), c.clock.Now())
	victims = victims[:n]
	uids := make([]types.UID, len(victims))
	for i, p := range victims {
		uids[i] = p.UID
	}
	c.expectations.ExpectDeletions(key, uids)
	klog.FromContext(ctx).V(2).Info("Too many replicas", "replicaSet", klog.KObj(rs), "need", replicas(rs), "deleting", n)

	errs := make([]error, len(victims))
	var wg sync.WaitGroup
	for i, pod := range victims {
		wg.Go(func() { errs[i] = c.deletePod(ctx, key, rs, pod) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete pods of replicaset %s: %w", key, err)
	}
	return nil
}

func (c *Controller) deletePod(ctx context.Context, key string, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	// The UID precondition keeps a Pod re-created under the same name safe.
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err == nil {
		c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
		return nil
	}
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		c.expectations.DeletionObserved(key, pod.UID)
		return nil // gone already
	case !timedOut(err):
		c.expectations.DeletionObserved(key, pod.UID)
	}
	// After a timeout the Pod may be going all the same: keep expecting
	// it, or the next sync could delete one too many.
	c.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
	return err
}

// timedOut reports whether a write failed without saying whether it was
// done: the API server may have carried it out after the deadline.
func timedOut(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded)
}

// relatedPods are the Pods counted for colocation when choosing which to
// delete: those of every ReplicaSet with rs's controller (a Deployment's
// old and new ones), or rs's own when it has none, as upstream.
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet, own []*corev1.Pod) []*corev1.Pod {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return own
	}
	sets, err := c.replicaSets.ReplicaSets(rs.Namespace).List(labels.Everything())
	if err != nil {
		return own
	}
	var related []*corev1.Pod
	for _, sibling := range sets {
		if r := metav1.GetControllerOfNoCopy(sibling); r == nil || r.UID != ref.UID {
			continue
		}
		pods, err := c.pods.Candidates(sibling.Namespace, sibling.UID)
		if err != nil {
			return own
		}
		for _, p := range pods {
			if metav1.IsControlledBy(p, sibling) {
				related = append(related, p)
			}
		}
	}
	return related
}
