package endpoints

import (
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// manyPods returns n pods named <prefix><i> with IPs 10.<block>.x.y.
func manyPods(prefix string, block, n int, opts ...func(*corev1.Pod)) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		ip := fmt.Sprintf("10.%d.%d.%d", block, i/250, i%250+1)
		pods[i] = pod(fmt.Sprintf("%s%d", prefix, i), "web", []string{ip}, opts...)
	}
	return pods
}

func TestDesired(t *testing.T) {
	trigger := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	tests := []struct {
		name            string
		svc             *corev1.Service
		pods            []*corev1.Pod
		current         *corev1.Endpoints
		trigger         time.Time
		wantLabels      map[string]string
		wantAnnotations map[string]string
		wantReady       int
		wantNotReady    int
	}{{
		name:       "copies the service labels",
		svc:        service("web"),
		pods:       []*corev1.Pod{pod("a", "web", []string{"10.0.0.1"})},
		wantLabels: map[string]string{"team": "a"},
		wantReady:  1,
	}, {
		name:       "labels headless services",
		svc:        service("web", headless),
		wantLabels: map[string]string{"team": "a", corev1.IsHeadlessService: ""},
	}, {
		name: "drops a stale headless label and keeps foreign annotations",
		svc:  service("web"),
		current: &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web",
			Labels:      map[string]string{corev1.IsHeadlessService: "", "old": "x"},
			Annotations: map[string]string{"note": "keep", corev1.EndpointsOverCapacity: "truncated"}}},
		wantLabels:      map[string]string{"team": "a"},
		wantAnnotations: map[string]string{"note": "keep"},
	}, {
		name:            "publishes the trigger time",
		svc:             service("web"),
		trigger:         trigger,
		wantLabels:      map[string]string{"team": "a"},
		wantAnnotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-03-04T05:06:07.000000008Z"},
	}, {
		name:            "truncates at 1000 and says so",
		svc:             service("web"),
		pods:            append(manyPods("r", 1, 990), manyPods("n", 2, 11, notReady)...),
		wantLabels:      map[string]string{"team": "a"},
		wantAnnotations: map[string]string{corev1.EndpointsOverCapacity: "truncated"},
		wantReady:       990,
		wantNotReady:    10,
	}, {
		name:         "1000 addresses are not over capacity",
		svc:          service("web"),
		pods:         manyPods("n", 2, 1000, notReady),
		wantLabels:   map[string]string{"team": "a"},
		wantNotReady: 1000,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Desired(tc.svc, tc.pods, tc.current, tc.trigger)
			if got.Namespace != "ns" || got.Name != tc.svc.Name {
				t.Errorf("got %s/%s, want ns/%s", got.Namespace, got.Name, tc.svc.Name)
			}
			if !maps.Equal(got.Labels, tc.wantLabels) {
				t.Errorf("got labels %v, want %v", got.Labels, tc.wantLabels)
			}
			if !maps.Equal(got.Annotations, tc.wantAnnotations) {
				t.Errorf("got annotations %v, want %v", got.Annotations, tc.wantAnnotations)
			}
			ready, notReady := countAddresses(got.Subsets)
			if ready != tc.wantReady || notReady != tc.wantNotReady {
				t.Errorf("got %d ready and %d not ready, want %d and %d", ready, notReady, tc.wantReady, tc.wantNotReady)
			}
		})
	}
}

func TestNeedsUpdate(t *testing.T) {
	svc := service("web")
	pods := []*corev1.Pod{pod("a", "web", []string{"10.0.0.1"}), pod("b", "web", []string{"10.0.0.2"})}
	written := Desired(svc, pods, nil, time.Now())
	tests := []struct {
		name    string
		current func() *corev1.Endpoints
		want    bool
	}{
		{"absent", func() *corev1.Endpoints { return nil }, true},
		{"identical", written.DeepCopy, false},
		{"only the trigger time differs", func() *corev1.Endpoints {
			ep := written.DeepCopy()
			ep.Annotations[corev1.EndpointsLastChangeTriggerTime] = "2000-01-01T00:00:00Z"
			return ep
		}, false},
		{"addresses in another order", func() *corev1.Endpoints {
			ep := written.DeepCopy()
			a := ep.Subsets[0].Addresses
			a[0], a[1] = a[1], a[0]
			return ep
		}, false},
		{"target resourceVersion differs", func() *corev1.Endpoints {
			ep := written.DeepCopy()
			ep.Subsets[0].Addresses[0].TargetRef.ResourceVersion = "42"
			return ep
		}, false},
		{"an address is missing", func() *corev1.Endpoints {
			ep := written.DeepCopy()
			ep.Subsets[0].Addresses = ep.Subsets[0].Addresses[:1]
			return ep
		}, true},
		{"a label differs", func() *corev1.Endpoints {
			ep := written.DeepCopy()
			ep.Labels["team"] = "b"
			return ep
		}, true},
		{"a stale over-capacity annotation", func() *corev1.Endpoints {
			ep := written.DeepCopy()
			ep.Annotations[corev1.EndpointsOverCapacity] = "truncated"
			return ep
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			desired := Desired(svc, pods, tc.current(), time.Time{})
			if got := NeedsUpdate(tc.current(), desired); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCreatedByController(t *testing.T) {
	tests := []struct {
		name     string
		managers []string
		want     bool
	}{
		{"no managed fields", nil, false},
		{"written by a user", []string{"kubectl-client-side-apply"}, false},
		{"written by this controller", []string{"kubectl-edit", FieldManager}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := &corev1.Endpoints{}
			for _, m := range tc.managers {
				ep.ManagedFields = append(ep.ManagedFields, metav1.ManagedFieldsEntry{Manager: m})
			}
			if got := CreatedByController(ep); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
