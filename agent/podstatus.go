//go:build linux

package agent

import (
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// view is what container c's status is made from now; policy is how it
// restarts, for the back-off it may be waiting out.
func (rt *podRuntime) view(c *corev1.Container, policy corev1.RestartPolicy) containerView {
	cr := rt.ctr(c.Name)
	v := containerView{Name: c.Name, Image: c.Image, ID: cr.st.ID, RestartCount: cr.st.RestartCount,
		Running: cr.proc != nil, StartedAt: cr.st.StartedAt, Exited: cr.st.Exited, Last: cr.st.Last,
		WaitingReason: cr.waitReason, WaitingMessage: cr.waitMessage, Started: cr.started.Load()}
	v.Ready = running(cr.proc) && v.Started && (c.ReadinessProbe == nil || cr.ready.Load())
	if v.Exited != nil && !rt.terminating && !rt.cleaned && restarts(policy, v.Exited.ExitCode) && time.Until(cr.st.BackOffUntil) > 0 {
		v.BackOff = max(cr.st.BackOff.Delay/2, backOffInitial)
	}
	return v
}

// podStatus is the pod's status as the agent sees it now.
func (a *Agent) podStatus(pod *corev1.Pod, rt *podRuntime) *corev1.PodStatus {
	st := pod.Status.DeepCopy()
	var statuses []corev1.ContainerStatus
	for i := range pod.Spec.Containers {
		statuses = append(statuses, containerStatus(rt.view(&pod.Spec.Containers[i], pod.Spec.RestartPolicy), pod))
	}
	initStatuses := a.initContainerStatuses(pod, rt)
	phase := podPhase(pod.Spec.RestartPolicy, pod.Spec.Containers, statuses)
	if initFailed(pod.Spec.RestartPolicy, pod.Spec.InitContainers, initStatuses) {
		phase = corev1.PodFailed // and no app container ever starts
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		phase = pod.Status.Phase // a finished pod stays finished
	}
	st.Phase = phase
	st.Conditions = podConditions(pod, initStatuses, statuses, phase, rt.sandboxUp, time.Now())
	st.InitContainerStatuses, st.ContainerStatuses = initStatuses, statuses
	st.HostIP, st.HostIPs = "", nil
	for i, ip := range a.hostIPs() {
		if i == 0 {
			st.HostIP = ip
		}
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
	}
	st.PodIP, st.PodIPs = "", nil
	for i, ip := range rt.st.IPs {
		if i == 0 {
			st.PodIP = ip
		}
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
	}
	if !rt.st.StartTime.IsZero() {
		st.StartTime = ptr.To(metaTime(rt.st.StartTime))
	}
	return st
}

// statusRetry is how soon a status write that failed is tried again.
const statusRetry = time.Second

// writeStatus writes the pod's status when it changed, through the status
// subresource, retrying on conflict with the latest pod. It reports false
// when the status may not be written: the caller must try again soon, as
// nothing else would (a probe result that does not change again never
// wakes the worker).
func (a *Agent) writeStatus(ctx context.Context, pod *corev1.Pod, rt *podRuntime) (*corev1.PodStatus, bool) {
	cur := rt.statusBase(pod)
	st := a.podStatus(cur, rt)
	if equality.Semantic.DeepEqual(*st, cur.Status) || (rt.lastWritten != nil && equality.Semantic.DeepEqual(st, rt.lastWritten)) {
		return st, true
	}
	pods := a.client.CoreV1().Pods(pod.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		upd := cur.DeepCopy()
		upd.Status = *st
		got, err := pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		switch {
		case err == nil:
			rt.lastWritten, rt.lastPod = st, got
			return st, true
		case apierrors.IsNotFound(err):
			return st, true
		case apierrors.IsConflict(err):
			fresh, gerr := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) || (gerr == nil && fresh.UID != pod.UID) {
				return st, true
			}
			if gerr != nil {
				klog.FromContext(ctx).Error(gerr, "Get pod after a status conflict")
				return st, false
			}
			cur = fresh
			st = a.podStatus(fresh, rt)
		default:
			klog.FromContext(ctx).Error(err, "Update pod status")
			return st, false
		}
	}
	klog.FromContext(ctx).Error(nil, "Update pod status: a conflict at each attempt", "attempts", 5)
	return st, false
}

// statusBase is the newest copy of the pod the agent has: the informer's,
// or the one its last status write returned while the informer has not
// caught up with that write yet. Writing from the informer's copy then
// would only conflict and cost a GET and a second write, as it would
// whenever a probe result arrives right after the container started.
func (rt *podRuntime) statusBase(pod *corev1.Pod) *corev1.Pod {
	last := rt.lastPod
	if last == nil || last.UID != pod.UID {
		return pod
	}
	// Resource versions are opaque in the API, but this API server's come
	// from etcd revisions; when either does not parse, trust the informer.
	seen, err1 := strconv.ParseUint(pod.ResourceVersion, 10, 64)
	wrote, err2 := strconv.ParseUint(last.ResourceVersion, 10, 64)
	if err1 != nil || err2 != nil || seen >= wrote {
		return pod
	}
	return last
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
