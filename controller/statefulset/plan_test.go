package statefulset

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// input is a sync of set whose current revision is r1 and whose update
// revision is r2 when rolling is set, r1 otherwise.
func input(set *appsv1.StatefulSet, rolling bool, pods ...*corev1.Pod) Input {
	in := Input{Set: set, Current: set, Update: set, CurrentRevision: "r1", UpdateRevision: "r1", Pods: pods, Now: now}
	if rolling {
		in.UpdateRevision = "r2"
	}
	return in
}

func TestPlanPods(t *testing.T) {
	web := statefulSet(3)
	par := statefulSet(3, parallel)
	one := statefulSet(1)
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"ordered creates web-0 alone", input(web, false), "create web-0@r1"},
		{"ordered waits for a pending pod", input(web, false, member(web, 0, "r1", pending)), ""},
		{"ordered waits for a pod not ready", input(web, false, member(web, 0, "r1", notReady)), ""},
		{"ordered creates the next once the lower ones are ready",
			input(web, false, member(web, 0, "r1")), "create web-1@r1"},
		{"ordered fills a gap before going on",
			input(web, false, member(web, 0, "r1"), member(web, 2, "r1")), "create web-1@r1"},
		{"parallel creates all at once", input(par, false), "create web-0@r1, create web-1@r1, create web-2@r1"},
		{"parallel does not wait for a pod not ready",
			input(par, false, member(par, 0, "r1", notReady)), "create web-1@r1, create web-2@r1"},
		{"a failed pod is deleted to be made again",
			input(web, false, member(web, 0, "r1"), member(web, 1, "r1", failed), member(web, 2, "r1")), "delete web-1"},
		{"a terminating pod is waited for",
			input(web, false, member(web, 0, "r1"), member(web, 1, "r1", terminating)), ""},
		{"scale down removes the highest ordinal first",
			input(one, false, member(one, 0, "r1"), member(one, 1, "r1"), member(one, 2, "r1")), "delete web-2"},
		{"scale down waits while another pod is unhealthy",
			input(one, false, member(one, 0, "r1", notReady), member(one, 1, "r1"), member(one, 2, "r1")), ""},
		{"scale down waits for the last removal",
			input(one, false, member(one, 0, "r1"), member(one, 1, "r1"), member(one, 2, "r1", terminating)), ""},
		{"scale down may remove the first unhealthy pod itself",
			input(one, false, member(one, 0, "r1"), member(one, 1, "r1", notReady)), "delete web-1"},
		{"parallel scale down removes all at once",
			input(statefulSet(1, parallel), false, member(par, 0, "r1"), member(par, 1, "r1"), member(par, 2, "r1")),
			"delete web-1, delete web-2"},
		{"a pod that lost its identity is fixed",
			input(web, false, member(web, 0, "r1", func(p *corev1.Pod) { delete(p.Labels, PodNameLabel) })),
			"create web-1@r1, fix web-0"},
		{"pods of another name are not members", input(one, false, member(statefulSet(1), 0, "r1", func(p *corev1.Pod) {
			p.Name = "web-x"
		}), member(one, 0, "r1")), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(Plan(tc.in)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlanRollingUpdate(t *testing.T) {
	all := func(set *appsv1.StatefulSet, revs ...string) []*corev1.Pod {
		var pods []*corev1.Pod
		for i, r := range revs {
			pods = append(pods, member(set, i, r))
		}
		return pods
	}
	tests := []struct {
		name string
		set  *appsv1.StatefulSet
		revs []string
		opts func(pods []*corev1.Pod)
		want string
	}{
		{name: "highest ordinal first", set: statefulSet(3), revs: []string{"r1", "r1", "r1"}, want: "delete web-2"},
		{name: "then the next below", set: statefulSet(3), revs: []string{"r1", "r1", "r2"}, want: "delete web-1"},
		{name: "waits for the updated pod to be ready", set: statefulSet(3), revs: []string{"r1", "r1", "r2"},
			opts: func(p []*corev1.Pod) { notReady(p[2]) }, want: ""},
		{name: "replaced pod is recreated from the update revision", set: statefulSet(3), revs: []string{"r1", "r1"},
			want: "create web-2@r2"},
		{name: "stops at the partition", set: statefulSet(3, partition(2)), revs: []string{"r1", "r1", "r2"}, want: ""},
		{name: "pods below the partition come back at the current revision", set: statefulSet(3, partition(2)),
			revs: []string{"r1"}, want: "create web-1@r1"},
		{name: "maxUnavailable deletes several at once", set: statefulSet(3, maxUnavailable(intstr.FromInt32(2))),
			revs: []string{"r1", "r1", "r1"}, want: "delete web-1, delete web-2"},
		{name: "maxUnavailable as a percentage rounds down", set: statefulSet(4, maxUnavailable(intstr.FromString("60%"))),
			revs: []string{"r1", "r1", "r1", "r1"}, want: "delete web-2, delete web-3"},
		{name: "OnDelete leaves pods to the user", set: statefulSet(3, onDelete), revs: []string{"r1", "r1", "r1"}, want: ""},
		{name: "OnDelete recreates from the update revision", set: statefulSet(3, onDelete), revs: []string{"r1", "r1"},
			want: "create web-2@r2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := all(tc.set, tc.revs...)
			if tc.opts != nil {
				tc.opts(pods)
			}
			if got := render(Plan(input(tc.set, true, pods...))); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlanStatus(t *testing.T) {
	web := statefulSet(3)
	slow := statefulSet(2, func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 30 })
	tests := []struct {
		name    string
		in      Input
		want    appsv1.StatefulSetStatus
		recheck time.Duration
	}{
		{"a finished rollout makes the update revision current",
			input(web, true, member(web, 0, "r2"), member(web, 1, "r2"), member(web, 2, "r2")),
			appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 3,
				UpdatedReplicas: 3, CurrentRevision: "r2", UpdateRevision: "r2"}, 0},
		{"a rollout under way counts both revisions",
			input(web, true, member(web, 0, "r1"), member(web, 1, "r1"), member(web, 2, "r2", notReady)),
			appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, CurrentReplicas: 2,
				UpdatedReplicas: 1, CurrentRevision: "r1", UpdateRevision: "r2"}, 0},
		{"a pod ready for less than minReadySeconds is not available",
			input(slow, false, member(slow, 0, "r1"), member(slow, 1, "r1", readySince(10*time.Second))),
			appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 1, CurrentReplicas: 2,
				UpdatedReplicas: 2, CurrentRevision: "r1", UpdateRevision: "r1"}, 20 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Plan(tc.in)
			got := res.Status
			got.CollisionCount, got.ObservedGeneration = nil, 0
			if !equalStatus(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if res.RecheckAfter != tc.recheck {
				t.Errorf("recheck after %v, want %v", res.RecheckAfter, tc.recheck)
			}
		})
	}
}

func equalStatus(a, b appsv1.StatefulSetStatus) bool {
	return a.Replicas == b.Replicas && a.ReadyReplicas == b.ReadyReplicas && a.AvailableReplicas == b.AvailableReplicas &&
		a.CurrentReplicas == b.CurrentReplicas && a.UpdatedReplicas == b.UpdatedReplicas &&
		a.CurrentRevision == b.CurrentRevision && a.UpdateRevision == b.UpdateRevision
}

func TestNewPodIdentity(t *testing.T) {
	set := statefulSet(3, func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} })
	res := Plan(input(set, false))
	if len(res.Create) != 1 {
		t.Fatalf("got %d creates, want 1", len(res.Create))
	}
	p := res.Create[0]
	checks := []struct{ what, got, want string }{
		{"name", p.Name, "web-5"},
		{"hostname", p.Spec.Hostname, "web-5"},
		{"subdomain", p.Spec.Subdomain, "nginx"},
		{"pod-name label", p.Labels[PodNameLabel], "web-5"},
		{"pod-index label", p.Labels[PodIndexLabel], "5"},
		{"revision label", p.Labels[RevisionLabel], "r1"},
		{"template label", p.Labels["app"], "nginx"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
		}
	}
	if ref := p.OwnerReferences; len(ref) != 1 || ref[0].UID != set.UID || !ptr.Deref(ref[0].Controller, false) {
		t.Errorf("got ownerReferences %+v, want the set as controller", ref)
	}
}

// Under Parallel, where a pod not ready does not stop the sync before
// the update, maxUnavailable counts the unavailable pods at every ordinal.
func TestPlanRollingUpdateCountsEveryUnavailablePod(t *testing.T) {
	tests := []struct {
		name string
		set  *appsv1.StatefulSet
		pods func(set *appsv1.StatefulSet) []*corev1.Pod
		want string
	}{
		{"a pod below the partition not ready holds the update", statefulSet(3, parallel, partition(2)),
			func(s *appsv1.StatefulSet) []*corev1.Pod {
				return []*corev1.Pod{member(s, 0, "r1"), member(s, 1, "r1", notReady), member(s, 2, "r1")}
			}, ""},
		{"an unavailable pod uses up part of maxUnavailable", statefulSet(4, parallel, maxUnavailable(intstr.FromInt32(2))),
			func(s *appsv1.StatefulSet) []*corev1.Pod {
				return []*corev1.Pod{member(s, 0, "r1", notReady), member(s, 1, "r1"), member(s, 2, "r1"), member(s, 3, "r1")}
			}, "delete web-3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(Plan(input(tc.set, true, tc.pods(tc.set)...))); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
