package endpoints

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// triggerTimes computes the endpoints.kubernetes.io/last-change-trigger-time
// annotation: the earliest time at which something that changed since the
// previous sync of a Service changed. A pod's change time is the last
// transition of its Ready condition, the Service's its creation. Like
// upstream, it can be off when one object changes several times between
// two syncs; the annotation is a latency hint, not a record.
//
// Calls for different Services may run concurrently; calls for the same
// Service must not (the workqueue guarantees that).
type triggerTimes struct {
	mu     sync.Mutex
	states map[string]triggerState
}

type triggerState struct {
	service time.Time
	pods    map[string]time.Time // pod name -> Ready transition time
}

// compute updates the state of the Service key and returns the trigger
// time to publish; zero means "publish none".
func (t *triggerTimes) compute(key string, svc *corev1.Service, pods []*corev1.Pod) time.Time {
	t.mu.Lock()
	prev, known := t.states[key]
	t.mu.Unlock()

	next := triggerState{service: svc.CreationTimestamp.Time, pods: make(map[string]time.Time, len(pods))}
	var earliest time.Time
	for _, pod := range pods {
		changed := readyTransition(pod)
		if changed.IsZero() {
			continue
		}
		next.pods[pod.Name] = changed
		if changed.After(prev.pods[pod.Name]) {
			earliest = earlier(earliest, changed)
		}
	}
	if next.service.After(prev.service) {
		earliest = earlier(earliest, next.service)
	}

	t.mu.Lock()
	if t.states == nil {
		t.states = map[string]triggerState{}
	}
	t.states[key] = next
	t.mu.Unlock()

	if !known {
		// First sync of this Service: it exists because it was created.
		return svc.CreationTimestamp.Time
	}
	return earliest
}

// forget drops the state of a deleted Service.
func (t *triggerTimes) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.states, key)
}

func readyTransition(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// earlier returns the earlier of two times, treating zero as "unset".
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
