package deployment

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations upstream writes on Deployments and their ReplicaSets;
// kubectl rollout history and undo read them.
const (
	// RevisionAnnotation is the rollout revision of a ReplicaSet, and the
	// latest one on its Deployment.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier revisions a ReplicaSet
	// was, when a rollback brought its template back.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's spec.replicas when it
	// last scaled the ReplicaSet.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is spec.replicas plus maxSurge at that time,
	// the base of proportional scaling.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"

	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	rollbackToAnnotation  = "deprecated.deployment.rollback.to"

	// maxRevisionHistoryChars bounds the revision-history annotation, as
	// upstream, so that many rollbacks never grow it without end.
	maxRevisionHistoryChars = 2000
)

// skipped are the annotations a Deployment keeps for itself and never
// copies to its ReplicaSets.
func skipped(key string) bool {
	switch key {
	case lastAppliedAnnotation, RevisionAnnotation, RevisionHistoryAnnotation,
		DesiredReplicasAnnotation, MaxReplicasAnnotation, rollbackToAnnotation:
		return true
	}
	return false
}

// revision is obj's revision annotation, 0 when absent or not a number.
func revision(obj metav1.Object) int64 {
	v, err := strconv.ParseInt(obj.GetAnnotations()[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// maxRevision is the highest revision among rss.
func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revision(rs))
	}
	return m
}

// copyAnnotations copies d's own annotations onto rs, reporting whether
// rs changed.
func copyAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if skipped(k) {
			continue
		}
		if cur, ok := rs.Annotations[k]; !ok || cur != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// setNewReplicaSetAnnotations brings the new ReplicaSet's annotations up
// to date for revision newRevision: d's own annotations, the revision,
// the revision history when the revision moves on, and for a ReplicaSet
// being created the replicas annotations. It reports whether rs changed.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool) bool {
	changed := copyAnnotations(d, rs)
	oldRevision := rs.Annotations[RevisionAnnotation]
	oldNum, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			return false // not ours to fix; leave rs as it is
		}
		oldNum = 0
	}
	newNum, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		return false
	}
	if oldNum < newNum {
		rs.Annotations[RevisionAnnotation] = newRevision
		changed = true
		if oldRevision != "" {
			rs.Annotations[RevisionHistoryAnnotation] = appendHistory(rs.Annotations[RevisionHistoryAnnotation], oldRevision)
		}
	}
	if !exists && setReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)) {
		changed = true
	}
	return changed
}

// appendHistory adds rev to a comma-separated history, dropping the
// oldest entries beyond maxRevisionHistoryChars.
func appendHistory(history, rev string) string {
	if history == "" {
		return rev
	}
	parts := append(strings.Split(history, ","), rev)
	for len(parts) > 1 && len(strings.Join(parts, ",")) > maxRevisionHistoryChars {
		parts = parts[1:]
	}
	return strings.Join(parts, ",")
}

// setDeploymentRevision records revision on d, reporting whether it
// changed.
func setDeploymentRevision(d *appsv1.Deployment, rev string) bool {
	if d.Annotations[RevisionAnnotation] == rev {
		return false
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = rev
	return true
}

// setReplicasAnnotations records desired and max replicas on rs,
// reporting whether it changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if !replicasAnnotationsNeedUpdate(rs, desired, maxReplicas) {
		return false
	}
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[DesiredReplicasAnnotation] = strconv.Itoa(int(desired))
	rs.Annotations[MaxReplicasAnnotation] = strconv.Itoa(int(maxReplicas))
	return true
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}

// intAnnotation reads a replicas annotation of rs.
func intAnnotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}
