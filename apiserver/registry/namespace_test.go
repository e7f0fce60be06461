package registry

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTerminatingNamespaceSurvivesStatusWrites pins what issue 23's
// namespace conditions exposed: writing a terminating namespace's status
// deleted it, its content still inside, because the generic rule looks at
// metadata.finalizers only.
func TestTerminatingNamespaceSurvivesStatusWrites(t *testing.T) {
	now, zero := metav1.Now(), int64(0)
	terminating := func(finalizers ...corev1.FinalizerName) *corev1.Namespace {
		return &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &now, DeletionGracePeriodSeconds: &zero},
			Spec:       corev1.NamespaceSpec{Finalizers: finalizers},
		}
	}
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want bool
	}{
		{"content still being deleted", terminating(corev1.FinalizerKubernetes), false},
		{"finalized", terminating(), true},
		{"not terminating", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := shouldDeleteNamespaceDuringUpdate(context.Background(), "/namespaces/ns", tc.ns, tc.ns); got != tc.want {
				t.Errorf("got delete %v, want %v", got, tc.want)
			}
		})
	}
}
