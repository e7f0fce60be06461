package main

import (
	"net/netip"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestComplete(t *testing.T) {
	three := int32(3)
	d := func(gen, observed int64, updated, replicas, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, Replicas: replicas,
				AvailableReplicas: available}}
	}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want bool
	}{
		{"done", d(2, 2, 3, 3, 3), true},
		{"new generation not observed", d(3, 2, 3, 3, 3), false},
		{"not all updated", d(2, 2, 2, 3, 3), false},
		{"old replicas left", d(2, 2, 3, 4, 3), false},
		{"not all available", d(2, 2, 3, 3, 2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := complete(tc.d); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeAgentAddresses(t *testing.T) {
	a := newNodeAgent(nil, "n0", netip.MustParsePrefix("10.244.3.0/29"))
	first, err := a.addr()
	if err != nil || first != netip.MustParseAddr("10.244.3.2") {
		t.Fatalf("first address: got %v, %v; want 10.244.3.2", first, err)
	}
	second, err := a.addr()
	if err != nil || second != netip.MustParseAddr("10.244.3.3") {
		t.Fatalf("second address: got %v, %v; want 10.244.3.3", second, err)
	}
	for range 3 {
		a.addr()
	}
	if _, err := a.addr(); err == nil {
		t.Fatalf("a /29 gave a sixth pod address")
	}
	a.release(&corev1.Pod{Status: corev1.PodStatus{PodIP: "10.244.3.2"}})
	if got, err := a.addr(); err != nil || got != first {
		t.Errorf("after release: got %v, %v; want %v", got, err, first)
	}
}
