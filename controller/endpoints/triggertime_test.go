package endpoints

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTriggerTimes(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := service("web", func(s *corev1.Service) { s.CreationTimestamp = metav1.NewTime(created) })
	readyAt := func(at time.Time) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at) }
	}
	t1, t2 := created.Add(time.Minute), created.Add(2*time.Minute)

	var tt triggerTimes
	steps := []struct {
		name string
		pods []*corev1.Pod
		want time.Time
	}{
		{"first sync reports the service's creation", []*corev1.Pod{pod("a", "web", nil, readyAt(t1))}, created},
		{"nothing changed reports nothing", []*corev1.Pod{pod("a", "web", nil, readyAt(t1))}, time.Time{}},
		{"a pod turning ready reports its transition", []*corev1.Pod{
			pod("a", "web", nil, readyAt(t1)), pod("b", "web", nil, readyAt(t2))}, t2},
		{"several changes report the earliest", []*corev1.Pod{
			pod("a", "web", nil, readyAt(t2.Add(time.Minute))), pod("b", "web", nil, readyAt(t2.Add(time.Second)))},
			t2.Add(time.Second)},
	}
	for _, s := range steps {
		if got := tt.compute("ns/web", svc, s.pods); !got.Equal(s.want) {
			t.Errorf("%s: got %v, want %v", s.name, got, s.want)
		}
	}
	tt.forget("ns/web")
	if got := tt.compute("ns/web", svc, nil); !got.Equal(created) {
		t.Errorf("after forget: got %v, want the creation time %v", got, created)
	}
}

func TestPodChanged(t *testing.T) {
	base := pod("a", "web", []string{"10.0.0.1"})
	base.ResourceVersion = "1"
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   bool
	}{
		{"periodic resync", func(p *corev1.Pod) {}, false},
		{"annotation only", func(p *corev1.Pod) { p.ResourceVersion, p.Annotations = "2", map[string]string{"x": "y"} }, false},
		{"labels", func(p *corev1.Pod) { p.ResourceVersion, p.Labels = "2", map[string]string{"app": "other"} }, true},
		{"readiness", func(p *corev1.Pod) { p.ResourceVersion = "2"; notReady(p) }, true},
		{"terminating", func(p *corev1.Pod) { p.ResourceVersion = "2"; terminating(p) }, true},
		{"phase", func(p *corev1.Pod) { p.ResourceVersion = "2"; p.Status.Phase = corev1.PodFailed }, true},
		{"IPs", func(p *corev1.Pod) { p.ResourceVersion, p.Status.PodIPs = "2", nil }, true},
		{"hostname", func(p *corev1.Pod) { p.ResourceVersion, p.Spec.Hostname = "2", "h" }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.mutate(cur)
			if got := podChanged(base, cur); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
