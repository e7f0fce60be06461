package replicaset

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"portal.dev/portal/controller/internal/podutil"
	"portal.dev/portal/controller/internal/workload"
)

// calculateStatus is rs's status given the active Pods it owns and the
// error, if any, of this sync's creates or deletes.
func calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	status := *rs.Status.DeepCopy()
	status.Replicas = int32(len(pods))
	status.FullyLabeledReplicas, status.ReadyReplicas, status.AvailableReplicas = 0, 0, 0
	templateLabels := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	for _, p := range pods {
		if templateLabels.Matches(labels.Set(p.Labels)) {
			status.FullyLabeledReplicas++
		}
		if podutil.IsReady(p) {
			status.ReadyReplicas++
			if workload.IsAvailable(p, rs.Spec.MinReadySeconds, now) {
				status.AvailableReplicas++
			}
		}
	}
	switch {
	case manageErr != nil && failureCondition(status) == nil:
		reason := "FailedCreate"
		if len(pods) > int(replicas(rs)) {
			reason = "FailedDelete"
		}
		status.Conditions = append(status.Conditions, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetReplicaFailure,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	case manageErr == nil && failureCondition(status) != nil:
		var kept []appsv1.ReplicaSetCondition
		for _, c := range status.Conditions {
			if c.Type != appsv1.ReplicaSetReplicaFailure {
				kept = append(kept, c)
			}
		}
		status.Conditions = kept
	}
	return status
}

func failureCondition(status appsv1.ReplicaSetStatus) *appsv1.ReplicaSetCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == appsv1.ReplicaSetReplicaFailure {
			return &status.Conditions[i]
		}
	}
	return nil
}

// updateStatus writes status and observedGeneration when they changed and
// returns the ReplicaSet as written. A conflict (another writer, or a
// cache behind the API) is retried once on a fresh read, as upstream;
// beyond that the sync fails and is retried.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	status.ObservedGeneration = rs.Generation
	if equality.Semantic.DeepEqual(rs.Status, status) {
		return rs, nil
	}
	api := c.client.AppsV1().ReplicaSets(rs.Namespace)
	for attempt := 0; ; attempt++ {
		next := rs.DeepCopy()
		next.Status = status // observedGeneration stays that of the spec it was computed from
		written, err := api.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			return written, nil
		}
		if !apierrors.IsConflict(err) || attempt == 1 {
			return nil, fmt.Errorf("update status of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		fresh, getErr := api.Get(ctx, rs.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, fmt.Errorf("update status of replicaset %s/%s: %w", rs.Namespace, rs.Name, getErr)
		}
		rs = fresh
	}
}

// replicas is spec.replicas, 1 when unset as the API server defaults it.
func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}
