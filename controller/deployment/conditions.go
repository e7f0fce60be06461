package deployment

import (
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The reasons of the Progressing and Available conditions, as upstream
// writes them; kubectl rollout status reads ProgressDeadlineExceeded.
const (
	reasonRSUpdated       = "ReplicaSetUpdated"
	reasonRSCreateFailed  = "ReplicaSetCreateError"
	reasonNewRSCreated    = "NewReplicaSetCreated"
	reasonFoundNewRS      = "FoundNewReplicaSet"
	reasonNewRSAvailable  = "NewReplicaSetAvailable"
	reasonTimedOut        = "ProgressDeadlineExceeded"
	reasonPaused          = "DeploymentPaused"
	reasonResumed         = "DeploymentResumed"
	reasonMinAvailable    = "MinimumReplicasAvailable"
	reasonMinUnavailable  = "MinimumReplicasUnavailable"
	progressing           = appsv1.DeploymentProgressing
	available             = appsv1.DeploymentAvailable
	replicaFailure        = appsv1.DeploymentReplicaFailure
	rsReplicaFailure      = appsv1.ReplicaSetReplicaFailure
	noProgressDeadlineSet = math.MaxInt32
)

func newCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{
		Type:               t,
		Status:             status,
		Reason:             reason,
		Message:            msg,
		LastUpdateTime:     metav1.NewTime(now),
		LastTransitionTime: metav1.NewTime(now),
	}
}

func getCondition(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// setCondition puts c in s, as upstream: the same status and reason
// leave the existing condition as it is, and the same status keeps its
// transition time.
func setCondition(s *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(*s, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(s, c.Type)
	s.Conditions = append(s.Conditions, c)
}

func removeCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != noProgressDeadlineSet
}

func hasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

// calculateStatus is d's status as its ReplicaSets show it, with the
// Available condition; the Progressing condition is carried over for
// the rollout to update.
func calculateStatus(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, now time.Time) appsv1.DeploymentStatus {
	availableN := sum(all, availableReplicas)
	s := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sum(all, statusReplicas),
		UpdatedReplicas:     sum([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sum(all, readyReplicas),
		AvailableReplicas:   availableN,
		UnavailableReplicas: max(0, sum(all, specReplicas)-availableN),
		CollisionCount:      d.Status.CollisionCount,
	}
	for _, c := range d.Status.Conditions {
		setCondition(&s, c)
	}
	if availableN >= desired(d)-maxUnavailable(d) {
		setCondition(&s, newCondition(available, corev1.ConditionTrue, reasonMinAvailable, "Deployment has minimum availability.", now))
	} else {
		setCondition(&s, newCondition(available, corev1.ConditionFalse, reasonMinUnavailable, "Deployment does not have minimum availability.", now))
	}
	return s
}

// complete reports whether s shows every replica of d's latest spec
// updated and available, and no old ones left.
func complete(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	want := desired(d)
	return s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want &&
		s.ObservedGeneration >= d.Generation
}

// progressed reports whether s moves d's rollout on from its last
// status: more updated, ready or available Pods, or fewer old ones.
func progressed(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	old := d.Status
	return s.UpdatedReplicas > old.UpdatedReplicas || s.ReadyReplicas > old.ReadyReplicas ||
		s.AvailableReplicas > old.AvailableReplicas ||
		old.Replicas-old.UpdatedReplicas > s.Replicas-s.UpdatedReplicas
}

// timedOut reports whether d's rollout has made no progress for
// progressDeadlineSeconds, by s's Progressing condition.
func timedOut(d *appsv1.Deployment, s *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := getCondition(*s, progressing)
	if c == nil || c.Reason == reasonNewRSAvailable {
		return false
	}
	if c.Reason == reasonTimedOut {
		return true
	}
	deadline := c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(now)
}

// updateProgressing sets s's Progressing condition for the rollout as
// upstream does: available when complete, updated when it progressed,
// ProgressDeadlineExceeded when it stalled past the deadline.
func updateProgressing(d *appsv1.Deployment, s *appsv1.DeploymentStatus, newRS *appsv1.ReplicaSet, now time.Time) {
	if !hasProgressDeadline(d) {
		removeCondition(s, progressing)
		return
	}
	cur := getCondition(d.Status, progressing)
	if s.Replicas == s.UpdatedReplicas && cur != nil && cur.Reason == reasonNewRSAvailable {
		return // done before, and nothing old came back
	}
	subject := fmt.Sprintf("Deployment %q", d.Name)
	if newRS != nil {
		subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
	}
	switch {
	case complete(d, s):
		setCondition(s, newCondition(progressing, corev1.ConditionTrue, reasonNewRSAvailable, subject+" has successfully progressed.", now))
	case progressed(d, s):
		c := newCondition(progressing, corev1.ConditionTrue, reasonRSUpdated, subject+" is progressing.", now)
		if cur != nil {
			if cur.Status == corev1.ConditionTrue {
				c.LastTransitionTime = cur.LastTransitionTime
			}
			// Replace, not set: progress must move LastUpdateTime on,
			// which the deadline counts from.
			removeCondition(s, progressing)
		}
		setCondition(s, c)
	case timedOut(d, s, now):
		setCondition(s, newCondition(progressing, corev1.ConditionFalse, reasonTimedOut, subject+" has timed out progressing.", now))
	}
}

// replicaFailure returns the ReplicaFailure condition of the new
// ReplicaSet, else of the first old one that has it, as a Deployment
// condition.
func replicaFailureOf(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	for _, rs := range withNew(nil, newRS) {
		if c := rsFailure(rs); c != nil {
			return c
		}
	}
	for _, rs := range all {
		if rs == nil || rs == newRS {
			continue
		}
		if c := rsFailure(rs); c != nil {
			return c
		}
	}
	return nil
}

func rsFailure(rs *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	for _, c := range rs.Status.Conditions {
		if c.Type == rsReplicaFailure {
			return &appsv1.DeploymentCondition{
				Type:               replicaFailure,
				Status:             c.Status,
				Reason:             c.Reason,
				Message:            c.Message,
				LastUpdateTime:     c.LastTransitionTime,
				LastTransitionTime: c.LastTransitionTime,
			}
		}
	}
	return nil
}
