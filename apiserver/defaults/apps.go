package defaults

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// defaultRevisionHistoryLimit is how many old ReplicaSets or
// ControllerRevisions a workload keeps unless told otherwise, as upstream.
const defaultRevisionHistoryLimit int32 = 10

// Deployment applies upstream's apps/v1 Deployment defaults: one replica,
// a RollingUpdate strategy with maxSurge and maxUnavailable 25%, a history
// of 10 ReplicaSets, a progress deadline of 600 seconds, and the template's
// pod spec defaulted as a template's is.
func Deployment(d *appsv1.Deployment) {
	replicas(&d.Spec.Replicas)
	st := &d.Spec.Strategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if st.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		intOrString(&st.RollingUpdate.MaxUnavailable, intstr.FromString("25%"))
		intOrString(&st.RollingUpdate.MaxSurge, intstr.FromString("25%"))
	}
	int32Default(&d.Spec.RevisionHistoryLimit, defaultRevisionHistoryLimit)
	int32Default(&d.Spec.ProgressDeadlineSeconds, 600)
	PodSpec(&d.Spec.Template.Spec)
}

// ReplicaSet applies upstream's apps/v1 ReplicaSet defaults: one replica
// and the template's pod spec defaults.
func ReplicaSet(rs *appsv1.ReplicaSet) {
	replicas(&rs.Spec.Replicas)
	PodSpec(&rs.Spec.Template.Spec)
}

// StatefulSet applies upstream's apps/v1 StatefulSet defaults: one
// replica, OrderedReady pod management, a RollingUpdate strategy with
// partition 0 (a strategy typed RollingUpdate by the client without
// parameters stays without them, as upstream), claims retained on delete
// and on scale-down, a history of 10 revisions, and the template's pod
// spec and claim templates defaulted.
func StatefulSet(s *appsv1.StatefulSet) {
	spec := &s.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := spec.UpdateStrategy.RollingUpdate; spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		int32Default(&ru.Partition, 0)
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	replicas(&spec.Replicas)
	int32Default(&spec.RevisionHistoryLimit, defaultRevisionHistoryLimit)
	PodSpec(&spec.Template.Spec)
	for i := range spec.VolumeClaimTemplates {
		claimTemplate(&spec.VolumeClaimTemplates[i])
	}
}

// DaemonSet applies upstream's apps/v1 DaemonSet defaults: a RollingUpdate
// strategy with maxUnavailable 1 and maxSurge 0, a history of 10
// revisions, and the template's pod spec defaults.
func DaemonSet(ds *appsv1.DaemonSet) {
	st := &ds.Spec.UpdateStrategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if st.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		intOrString(&st.RollingUpdate.MaxUnavailable, intstr.FromInt32(1))
		intOrString(&st.RollingUpdate.MaxSurge, intstr.FromInt32(0))
	}
	int32Default(&ds.Spec.RevisionHistoryLimit, defaultRevisionHistoryLimit)
	PodSpec(&ds.Spec.Template.Spec)
}

// claimTemplate defaults a StatefulSet's volume claim template as upstream
// defaults a PersistentVolumeClaim: volumeMode Filesystem, phase Pending.
func claimTemplate(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Spec.VolumeMode == nil {
		mode := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &mode
	}
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
}

func replicas(p **int32) { int32Default(p, 1) }

func int32Default(p **int32, v int32) {
	if *p == nil {
		*p = &v
	}
}

func intOrString(p **intstr.IntOrString, v intstr.IntOrString) {
	if *p == nil {
		*p = &v
	}
}
