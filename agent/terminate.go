//go:build linux

package agent

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent/probe"
)

// syncTerminating stops a pod that is being deleted, then deletes it for
// good (kubelet's final delete with grace 0).
//
// While its containers stop, the pod stays Ready as long as they run and
// their readiness probes pass, as with kubelet: the EndpointSlice
// controller then publishes it as serving and terminating, so proxies
// take it out of rotation but can still fall back to it when no other
// endpoint is ready. Each probe result on the way is written at once, and
// a container that exits is at once not ready (its state turns terminated
// once every container has stopped).
func (a *Agent) syncTerminating(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime) (time.Duration, bool) {
	logger := klog.FromContext(ctx)
	if !rt.cleaned {
		rt.terminating = true
		grace := time.Duration(rt.st.Grace) * time.Second
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		logger.Info("Stopping pod", "gracePeriod", grace)
		// The status written meanwhile looks containers up with rt.ctr,
		// which adds missing ones to rt.ctrs: add them all now, before
		// stopContainers reads the map from its own goroutine.
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				rt.ctr(c.Name)
			}
		}
		stopped := make(chan struct{})
		go func() { a.stopContainers(ctx, rt, pod, grace); close(stopped) }()
		a.writeStatus(ctx, pod, rt)
		for waiting := true; waiting; {
			select {
			case <-stopped:
				waiting = false
			case <-w.wake:
				a.writeStatus(ctx, pod, rt)
			}
		}
		if ctx.Err() != nil {
			// The agent is stopping: the pod goes on terminating under
			// the next agent, which adopts it.
			return 0, false
		}
		a.recordExits(rt)
		a.cleanup(ctx, rt)
		a.writeStatus(ctx, pod, rt)
	}
	if rt.deleteSent {
		return 5 * time.Second, false
	}
	err := a.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		logger.Error(err, "Delete stopped pod")
		return time.Second, false
	}
	rt.deleteSent = true
	return 5 * time.Second, false
}

// minStopGrace is the least time between SIGTERM and SIGKILL when a grace
// period was given, however much of it the preStop hook used (kubelet's
// minimum too): a process always gets a moment to shut down cleanly.
const minStopGrace = 2 * time.Second

// stopContainer runs c's preStop hook, sends SIGTERM, and SIGKILL once
// grace has passed (but never sooner than minStopGrace after SIGTERM, unless
// grace is zero), then waits until the process group is gone. When ctx
// ends first (the agent stops), it leaves the process alone.
func (a *Agent) stopContainer(ctx context.Context, rt *podRuntime, pod *corev1.Pod, c *corev1.Container, cr *ctrRuntime, grace time.Duration) {
	proc := cr.proc
	if proc == nil {
		return
	}
	deadline := time.Now().Add(grace)
	if c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		hctx, cancel := context.WithDeadline(ctx, deadline)
		a.runHook(hctx, rt, c, cr, c.Lifecycle.PreStop)
		cancel()
	}
	if ctx.Err() != nil {
		return
	}
	proc.Signal(syscall.SIGTERM)
	if grace > 0 {
		deadline = later(deadline, time.Now().Add(minStopGrace))
	}
	kill := time.NewTimer(time.Until(deadline))
	defer kill.Stop()
	select {
	case <-proc.Done():
	case <-kill.C:
	case <-ctx.Done():
		return
	}
	proc.Signal(syscall.SIGKILL)
	<-proc.Done()
	for i := 0; i < 100 && !proc.GroupGone(); i++ {
		proc.Signal(syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
}

func (a *Agent) runHook(ctx context.Context, rt *podRuntime, c *corev1.Container, cr *ctrRuntime, h *corev1.LifecycleHandler) {
	logger := klog.FromContext(ctx).WithValues("container", c.Name)
	switch {
	case h.Exec != nil:
		mounts := rt.st.Mounts
		if cr.mounts != nil {
			mounts = cr.mounts
		}
		code, out, err := a.execIn(ctx, cr.proc, cr.env, rt.namespaces(), mounts, h.Exec.Command)
		if err != nil || code != 0 {
			logger.Info("PreStop hook failed", "exitCode", code, "err", err, "output", string(out))
		}
	case h.HTTPGet != nil || h.TCPSocket != nil:
		host := ""
		if len(rt.st.IPs) > 0 {
			host = rt.st.IPs[0]
		}
		timeout := time.Until(deadlineOr(ctx, time.Now().Add(30*time.Second)))
		r, msg := probe.Run(ctx, corev1.ProbeHandler{HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}, timeout, probe.Target{Host: host, Ports: c.Ports})
		if r != probe.Success {
			logger.Info("PreStop hook failed", "message", msg)
		}
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func deadlineOr(ctx context.Context, d time.Time) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// killPod stops every container (see stopContainers), waits for them and
// records how they ended. It returns false, recording nothing, when ctx
// ended first: the agent is stopping, and the next one adopts the pod.
func (a *Agent) killPod(ctx context.Context, rt *podRuntime, pod *corev1.Pod, grace time.Duration) bool {
	a.stopContainers(ctx, rt, pod, grace)
	if ctx.Err() != nil {
		return false
	}
	a.recordExits(rt)
	return true
}

// stopContainers stops the app containers at once (preStop, SIGTERM,
// SIGKILL after grace) and waits for them; then, as kubelet does, the
// sidecars one at a time in reverse order, within what is left of grace,
// so they serve the app containers to the end. It changes no runtime
// state, so the pod's status can be written meanwhile.
func (a *Agent) stopContainers(ctx context.Context, rt *podRuntime, pod *corev1.Pod, grace time.Duration) {
	deadline := time.Now().Add(grace)
	var sidecars []*corev1.Container
	if pod != nil {
		for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
			if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
				sidecars = append(sidecars, c)
			}
		}
	}
	var wg sync.WaitGroup
	for name, cr := range rt.ctrs {
		if cr.proc == nil || slices.ContainsFunc(sidecars, func(c *corev1.Container) bool { return c.Name == name }) {
			continue
		}
		var spec *corev1.Container
		if pod != nil {
			for i := range pod.Spec.Containers {
				if pod.Spec.Containers[i].Name == name {
					spec = &pod.Spec.Containers[i]
				}
			}
		}
		a.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", name)
		wg.Add(1)
		go func() { defer wg.Done(); a.stopContainer(ctx, rt, pod, spec, cr, grace) }()
	}
	wg.Wait()
	for _, c := range sidecars {
		if cr := rt.ctrs[c.Name]; cr != nil && cr.proc != nil {
			a.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
			left := max(time.Until(deadline), 0)
			if grace > 0 {
				left = max(left, time.Millisecond) // still minStopGrace after SIGTERM
			}
			a.stopContainer(ctx, rt, pod, c, cr, left)
		}
	}
}

// recordExits records the end of every container that was running.
func (a *Agent) recordExits(rt *podRuntime) {
	now := time.Now()
	for name, cr := range rt.ctrs {
		if cr.proc != nil {
			a.recordExit(rt, name, cr, now)
		}
	}
}
