//go:build linux

package agent

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestBackOff(t *testing.T) {
	var b backOff
	var got []time.Duration
	for range 8 {
		got = append(got, b.next(time.Second))
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if d := b.next(10 * time.Minute); d != 0 {
		t.Errorf("after a 10-minute run: got %v, want an immediate restart", d)
	}
	if d := b.next(time.Second); d != 10*time.Second {
		t.Errorf("after the reset: got %v, want 10s", d)
	}
}

func TestRestarts(t *testing.T) {
	cases := []struct {
		policy corev1.RestartPolicy
		code   int32
		want   bool
	}{
		{corev1.RestartPolicyAlways, 0, true},
		{corev1.RestartPolicyAlways, 1, true},
		{corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyOnFailure, 137, true},
		{corev1.RestartPolicyNever, 1, false},
	}
	for _, tc := range cases {
		if got := restarts(tc.policy, tc.code); got != tc.want {
			t.Errorf("restarts(%s, %d): got %v, want %v", tc.policy, tc.code, got, tc.want)
		}
	}
}

func TestPodPhase(t *testing.T) {
	spec := []corev1.Container{{Name: "a"}, {Name: "b"}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	exited := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
	}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	st := func(name string, s corev1.ContainerState) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: s}
	}
	crashLoop := corev1.ContainerStatus{Name: "b", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: exited(1)}
	cases := []struct {
		name     string
		policy   corev1.RestartPolicy
		statuses []corev1.ContainerStatus
		want     corev1.PodPhase
	}{
		{"both running", corev1.RestartPolicyAlways, []corev1.ContainerStatus{st("a", running), st("b", running)}, corev1.PodRunning},
		{"one still creating", corev1.RestartPolicyAlways, []corev1.ContainerStatus{st("a", running), st("b", waiting)}, corev1.PodPending},
		{"one missing", corev1.RestartPolicyAlways, []corev1.ContainerStatus{st("a", running)}, corev1.PodPending},
		{"crash loop counts as stopped", corev1.RestartPolicyAlways, []corev1.ContainerStatus{st("a", running), crashLoop}, corev1.PodRunning},
		{"all succeeded, Never", corev1.RestartPolicyNever, []corev1.ContainerStatus{st("a", exited(0)), st("b", exited(0))}, corev1.PodSucceeded},
		{"one failed, Never", corev1.RestartPolicyNever, []corev1.ContainerStatus{st("a", exited(0)), st("b", exited(2))}, corev1.PodFailed},
		{"one failed, OnFailure restarts it", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{st("a", exited(0)), st("b", exited(2))}, corev1.PodRunning},
		{"all succeeded, OnFailure", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{st("a", exited(0)), st("b", exited(0))}, corev1.PodSucceeded},
		{"all exited, Always", corev1.RestartPolicyAlways, []corev1.ContainerStatus{st("a", exited(0)), st("b", exited(0))}, corev1.PodRunning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := podPhase(tc.policy, spec, tc.statuses); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestContainerStatus(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exit := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
	cases := []struct {
		name       string
		v          containerView
		wantState  string
		wantReason string
		wantLast   bool
		wantReady  bool
	}{
		{"running and ready", containerView{Running: true, StartedAt: start, Started: true, Ready: true}, "running", "", false, true},
		{"not running is never ready", containerView{Exited: exit, Ready: true}, "terminated", "Error", false, false},
		{"crash loop", containerView{Exited: exit, BackOff: 10 * time.Second, Last: exit}, "waiting", "CrashLoopBackOff", true, false},
		{"no command", containerView{WaitingReason: "NoCommand"}, "waiting", "NoCommand", false, false},
		{"creating", containerView{}, "waiting", "ContainerCreating", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := containerStatus(tc.v, pod)
			var state, reason string
			switch {
			case s.State.Running != nil:
				state = "running"
			case s.State.Waiting != nil:
				state, reason = "waiting", s.State.Waiting.Reason
			case s.State.Terminated != nil:
				state, reason = "terminated", s.State.Terminated.Reason
			}
			if state != tc.wantState || reason != tc.wantReason || s.Ready != tc.wantReady || (s.LastTerminationState.Terminated != nil) != tc.wantLast {
				t.Errorf("got %s/%s ready=%v last=%v, want %s/%s ready=%v last=%v", state, reason, s.Ready,
					s.LastTerminationState.Terminated != nil, tc.wantState, tc.wantReason, tc.wantReady, tc.wantLast)
			}
		})
	}
}

func TestPodConditions(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: then},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: then},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: then},
		}},
	}
	get := func(cs []corev1.PodCondition, t corev1.PodConditionType) corev1.PodCondition {
		for _, c := range cs {
			if c.Type == t {
				return c
			}
		}
		return corev1.PodCondition{}
	}
	ready := []corev1.ContainerStatus{{Name: "a", Ready: true}, {Name: "b", Ready: true}}
	cs := podConditions(pod, nil, ready, corev1.PodRunning, true, now)
	if c := get(cs, corev1.PodReady); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&metav1.Time{Time: now}) {
		t.Errorf("Ready: got %s at %v, want True at %v", c.Status, c.LastTransitionTime, now)
	}
	if c := get(cs, corev1.PodInitialized); !c.LastTransitionTime.Equal(&then) {
		t.Errorf("Initialized kept its status: got transition %v, want %v", c.LastTransitionTime, then)
	}
	if c := get(cs, corev1.PodScheduled); c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled: got %q, want it kept True", c.Status)
	}
	half := []corev1.ContainerStatus{{Name: "a", Ready: true}, {Name: "b"}}
	if c := get(podConditions(pod, nil, half, corev1.PodRunning, true, now), corev1.PodReady); c.Status != corev1.ConditionFalse || c.Message != "containers with unready status: [b]" {
		t.Errorf("one unready: got %s %q", c.Status, c.Message)
	}
	gated := pod.DeepCopy()
	gated.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	if c := get(podConditions(gated, nil, ready, corev1.PodRunning, true, now), corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != "ReadinessGatesNotReady" {
		t.Errorf("gate unset: got %s %s, want False ReadinessGatesNotReady", c.Status, c.Reason)
	}
	gated.Status.Conditions = append(gated.Status.Conditions, corev1.PodCondition{Type: "example.com/lb", Status: corev1.ConditionTrue})
	if c := get(podConditions(gated, nil, ready, corev1.PodRunning, true, now), corev1.PodReady); c.Status != corev1.ConditionTrue {
		t.Errorf("gate set: got %s, want True", c.Status)
	}
}

// TestStatusBase: a status write starts from the object the last write
// returned while the informer's copy is older, so it does not conflict.
// Regression: the Ready write right after a container started always
// conflicted (GET, second write).
func TestStatusBase(t *testing.T) {
	pod := func(uid, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name     string
		informer *corev1.Pod
		last     *corev1.Pod
		wantLast bool
	}{
		{"no write yet", pod("a", "10"), nil, false},
		{"informer behind the last write", pod("a", "10"), pod("a", "12"), true},
		{"informer caught up", pod("a", "12"), pod("a", "12"), false},
		{"informer ahead", pod("a", "15"), pod("a", "12"), false},
		{"another pod of the same name", pod("b", "10"), pod("a", "12"), false},
		{"opaque resource version", pod("a", "x"), pod("a", "12"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &podRuntime{lastPod: tc.last}
			got := rt.statusBase(tc.informer)
			if want := map[bool]*corev1.Pod{true: tc.last, false: tc.informer}[tc.wantLast]; got != want {
				t.Errorf("got resource version %s, want %s", got.ResourceVersion, want.ResourceVersion)
			}
		})
	}
}
