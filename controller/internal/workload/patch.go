package workload

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// PatchPod returns a Claimer.Patch for Pods through client.
func PatchPod(client kubernetes.Interface) func(context.Context, *corev1.Pod, []byte) error {
	return func(ctx context.Context, p *corev1.Pod, patch []byte) error {
		_, err := client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
}

// PatchReplicaSet returns a Claimer.Patch for ReplicaSets through client.
func PatchReplicaSet(client kubernetes.Interface) func(context.Context, *appsv1.ReplicaSet, []byte) error {
	return func(ctx context.Context, rs *appsv1.ReplicaSet, patch []byte) error {
		_, err := client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
}

// PatchRevision returns a Claimer.Patch for ControllerRevisions through
// client.
func PatchRevision(client kubernetes.Interface) func(context.Context, *appsv1.ControllerRevision, []byte) error {
	return func(ctx context.Context, r *appsv1.ControllerRevision, patch []byte) error {
		_, err := client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
}
