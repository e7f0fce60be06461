package endpointslice

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/controller/internal/podutil"
)

// triggerTimes computes the last-change-trigger-time of a sync as
// upstream's TriggerTimeTracker does: the earliest of the change times
// (a Pod's Ready transition, else its creation; the Service's creation)
// that are newer than what the previous successful sync of that Service
// saw. A Service seen for the first time reports its creation time.
//
// Changes that carry no time of their own (a Pod deleted, a label edited)
// give a zero time; the controller then falls back to when it first saw the
// event. The zero value is ready to use.
type triggerTimes struct {
	mu   sync.Mutex
	seen map[string]triggerState // by service key
}

// triggerState is what one sync saw; commit stores it once the sync's
// writes went through, so a failed sync reports the same time again.
type triggerState struct {
	service time.Time
	pods    map[string]time.Time
}

// compute returns the trigger time for a sync of key and the state to
// commit after it succeeds.
func (t *triggerTimes) compute(key string, svc *corev1.Service, pods []*corev1.Pod) (time.Time, triggerState) {
	t.mu.Lock()
	prev, known := t.seen[key]
	t.mu.Unlock()
	next := triggerState{service: svc.CreationTimestamp.Time, pods: make(map[string]time.Time, len(pods))}
	var earliest time.Time
	for _, pod := range pods {
		pt := podTriggerTime(pod)
		if pt.IsZero() {
			continue
		}
		next.pods[pod.Name] = pt
		if pt.After(prev.pods[pod.Name]) {
			earliest = earlier(earliest, pt)
		}
	}
	if !known {
		return next.service, next
	}
	if next.service.After(prev.service) {
		earliest = earlier(earliest, next.service)
	}
	return earliest, next
}

// commit records what a successful sync of key saw.
func (t *triggerTimes) commit(key string, s triggerState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[string]triggerState{}
	}
	t.seen[key] = s
}

// forget drops a deleted Service's state.
func (t *triggerTimes) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, key)
}

func podTriggerTime(pod *corev1.Pod) time.Time {
	if c := podutil.ReadyCondition(pod); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return pod.CreationTimestamp.Time
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
