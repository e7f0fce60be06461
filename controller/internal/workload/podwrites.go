package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// PodWriter creates and deletes a controller's Pods with its expectations
// kept in step, so that a sync that runs before the informer shows them
// neither makes a Pod twice nor deletes one twice. All fields are
// required.
type PodWriter struct {
	Client       kubernetes.Interface
	Recorder     record.EventRecorder
	Expectations *Expectations
}

// Write creates n Pods, the ith built by newPod(i), and deletes del, for
// the controller owner under key; it records upstream's Events on owner.
// Both sets of expectations are raised first, together. Creates run in
// slow-start batches; a create that fails, or is never tried, will never
// be seen and is taken off the expectations once, at once, unless it
// timed out (the Pod may exist all the same: it stays expected until it
// shows or the expectations lapse). Deletes run in parallel and are
// guarded by the Pod's UID; one already gone counts as done. Write
// returns every failure joined.
func (w PodWriter) Write(ctx context.Context, key string, owner runtime.Object, n int, newPod func(i int) *corev1.Pod, del []*corev1.Pod) error {
	uids := make([]types.UID, len(del))
	for i, p := range del {
		uids[i] = p.UID
	}
	w.Expectations.Expect(key, n, uids)
	createErr := w.create(ctx, key, owner, n, newPod)
	errs := make([]error, len(del)+1)
	errs[0] = createErr
	var wg sync.WaitGroup
	for i, pod := range del {
		wg.Go(func() { errs[i+1] = w.delete(ctx, key, owner, pod) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w PodWriter) create(ctx context.Context, key string, owner runtime.Object, n int, newPod func(i int) *corev1.Pod) error {
	var mu sync.Mutex
	pending := 0 // creates that failed but whose Pod may still show up
	made, err := SlowStart(ctx, n, func(ctx context.Context, i int) error {
		pod := newPod(i)
		created, err := w.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		switch {
		case err == nil:
			w.Recorder.Eventf(owner, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", created.Name)
			return nil
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// Every create fails until the namespace is gone; nothing to
			// report, and nothing will show.
			w.Expectations.CreationObserved(key)
			return nil
		case TimedOut(err):
			mu.Lock()
			pending++
			mu.Unlock()
		}
		w.Recorder.Eventf(owner, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return fmt.Errorf("create pod: %w", err)
	})
	for range n - made - pending {
		w.Expectations.CreationObserved(key)
	}
	return err
}

func (w PodWriter) delete(ctx context.Context, key string, owner runtime.Object, pod *corev1.Pod) error {
	err := w.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	switch {
	case err == nil:
		w.Recorder.Eventf(owner, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		w.Expectations.DeletionObserved(key, pod.UID)
		return nil // gone already, or a new Pod under the same name
	case !TimedOut(err):
		// After a timeout the Pod may be going all the same: it stays
		// expected, or the next sync could delete one too many.
		w.Expectations.DeletionObserved(key, pod.UID)
	}
	w.Recorder.Eventf(owner, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
	return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// TimedOut reports whether a write failed without saying whether it was
// done: the API server may have carried it out after the deadline.
func TimedOut(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded)
}
