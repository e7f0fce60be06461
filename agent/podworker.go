//go:build linux

package agent

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// podWorker serializes everything done to one pod, as kubelet's pod
// workers: informer events and process exits only wake it.
type podWorker struct {
	uid  types.UID
	wake chan struct{}

	mu      sync.Mutex
	pod     *corev1.Pod
	deleted bool
	rt      *podRuntime
	// targets are what exec and port-forward reach; written by the
	// worker after each sync.
	targets *podTargets
}

func (w *podWorker) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *podWorker) get() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.deleted
}

func (a *Agent) podEvent(ctx context.Context, obj any) {
	deleted := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if !deleted {
		// A delete event carries the last state; the lister no longer has it.
		if _, err := a.pods.Pods(pod.Namespace).Get(pod.Name); apierrors.IsNotFound(err) {
			deleted = true
		}
	}
	a.mu.Lock()
	w, ok := a.workers[pod.UID]
	if !ok && deleted {
		a.mu.Unlock()
		return
	}
	if !ok {
		w = &podWorker{uid: pod.UID, wake: make(chan struct{}, 1), rt: a.adopted[pod.UID]}
		delete(a.adopted, pod.UID)
		a.workers[pod.UID] = w
		a.wg.Add(1)
		go a.runWorker(ctx, w)
	}
	a.mu.Unlock()
	w.mu.Lock()
	w.pod, w.deleted = pod, deleted
	w.mu.Unlock()
	w.kick()
}

// startWorker runs a worker for a runtime without a pod: it stops it.
func (a *Agent) startWorker(ctx context.Context, uid types.UID, rt *podRuntime) {
	a.mu.Lock()
	w := &podWorker{uid: uid, wake: make(chan struct{}, 1), rt: rt, deleted: true}
	delete(a.adopted, uid)
	a.workers[uid] = w
	a.wg.Add(1)
	a.mu.Unlock()
	go a.runWorker(ctx, w)
	w.kick()
}

func (a *Agent) runWorker(ctx context.Context, w *podWorker) {
	defer a.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
		next, done := a.syncPod(ctx, w)
		a.publishTargets(w)
		if done {
			a.mu.Lock()
			if a.workers[w.uid] == w {
				delete(a.workers, w.uid)
			}
			a.mu.Unlock()
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if next <= 0 {
			next = time.Hour
		}
		timer.Reset(next)
	}
}

// syncPod brings the pod's processes to what its spec and deletion state
// ask and writes its status. It returns when to look again, and done when
// the pod is gone and cleaned up.
func (a *Agent) syncPod(ctx context.Context, w *podWorker) (time.Duration, bool) {
	pod, deleted := w.get()
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "uid", w.uid)
	ctx = klog.NewContext(ctx, logger)
	rt := w.rt
	if deleted || pod == nil {
		if rt != nil && !rt.cleaned {
			if a.killPod(ctx, rt, nil, time.Duration(rt.st.Grace)*time.Second) {
				a.cleanup(ctx, rt)
			}
		}
		return 0, true
	}
	if rt == nil {
		rt = a.newRuntime(pod)
		w.rt = rt
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			// Finished before this agent started (its state is gone with
			// its sandbox): never run it again.
			rt.cleaned = true
		}
	}
	rt.st.Grace = gracePeriod(pod)
	if pod.DeletionTimestamp != nil {
		return a.syncTerminating(ctx, w, pod, rt)
	}
	if rt.cleaned {
		// Finished pod, torn down: nothing runs any more, and its
		// status is written until it is.
		if rt.statusOwed {
			if _, ok := a.writeStatus(ctx, pod, rt); !ok {
				return statusRetry, false
			}
			rt.statusOwed = false
		}
		return 0, false
	}
	if !rt.sandboxUp {
		if err := a.startSandbox(ctx, pod, rt); err != nil {
			logger.Error(err, "Create pod sandbox")
			a.writeStatus(ctx, pod, rt) // retried with the sandbox
			return 2 * time.Second, false
		}
	}
	refresh, mounted := a.syncTokens(ctx, pod, rt)
	if !mounted {
		a.writeStatus(ctx, pod, rt)
		return refresh, false
	}
	next, initialized := a.syncInitContainers(ctx, w, pod, rt)
	if refresh > 0 && (next == 0 || refresh < next) {
		next = refresh
	}
	// App containers start once every init container has succeeded.
	for i := 0; initialized && i < len(pod.Spec.Containers); i++ {
		if d := a.syncContainer(ctx, w, pod, rt, &pod.Spec.Containers[i], pod.Spec.RestartPolicy); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	if err := rt.save(); err != nil {
		logger.Error(err, "Save pod state")
	}
	st, written := a.writeStatus(ctx, pod, rt)
	if !written && (next == 0 || next > statusRetry) {
		next = statusRetry
	}
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		// kubelet tears a finished pod's sandbox down and keeps its status.
		// Only sidecars may still run: they get the grace period, and
		// their ends are written.
		running := false
		for _, cr := range rt.ctrs {
			running = running || cr.proc != nil
		}
		if !a.killPod(ctx, rt, pod, time.Duration(rt.st.Grace)*time.Second) {
			return 0, false
		}
		a.cleanup(ctx, rt)
		if running {
			if _, ok := a.writeStatus(ctx, pod, rt); !ok {
				rt.statusOwed = true
				return statusRetry, false
			}
		}
	}
	return next, false
}

func gracePeriod(pod *corev1.Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}
