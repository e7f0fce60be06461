package defaults

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
}

// checkTemplate pins that a workload's template gets a template's pod spec
// defaults and none of the Pod-only ones.
func checkTemplate(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	if spec.RestartPolicy != corev1.RestartPolicyAlways || spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("template restartPolicy, dnsPolicy: got %q, %q, want Always, ClusterFirst", spec.RestartPolicy, spec.DNSPolicy)
	}
	if got := spec.Containers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("template imagePullPolicy: got %q, want Always", got)
	}
	if spec.EnableServiceLinks != nil {
		t.Errorf("template enableServiceLinks: got %v, want unset (Pods only)", *spec.EnableServiceLinks)
	}
}

func TestDeploymentDefaults(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: template()}}
	Deployment(d)
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil {
		t.Fatalf("strategy: got %+v, want RollingUpdate with parameters", d.Spec.Strategy)
	}
	if ru.MaxSurge.String() != "25%" || ru.MaxUnavailable.String() != "25%" {
		t.Errorf("maxSurge, maxUnavailable: got %s, %s, want 25%%, 25%%", ru.MaxSurge, ru.MaxUnavailable)
	}
	if *d.Spec.Replicas != 1 || *d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("replicas, revisionHistoryLimit, progressDeadlineSeconds: got %d, %d, %d, want 1, 10, 600",
			*d.Spec.Replicas, *d.Spec.RevisionHistoryLimit, *d.Spec.ProgressDeadlineSeconds)
	}
	checkTemplate(t, d.Spec.Template.Spec)

	recreate := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
	Deployment(recreate)
	if recreate.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("Recreate: got rollingUpdate %+v, want none", recreate.Spec.Strategy.RollingUpdate)
	}
	zero, three := int32(0), intstr.FromInt32(3)
	kept := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &zero,
		Strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &three}}}}
	Deployment(kept)
	if *kept.Spec.Replicas != 0 || kept.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() != 3 {
		t.Errorf("given values: got replicas %d, maxSurge %s, want 0, 3", *kept.Spec.Replicas, kept.Spec.Strategy.RollingUpdate.MaxSurge)
	}
}

func TestReplicaSetDefaults(t *testing.T) {
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: template()}}
	ReplicaSet(rs)
	if *rs.Spec.Replicas != 1 {
		t.Errorf("replicas: got %d, want 1", *rs.Spec.Replicas)
	}
	checkTemplate(t, rs.Spec.Template.Spec)
}

func TestStatefulSetDefaults(t *testing.T) {
	cases := []struct {
		name          string
		strategy      appsv1.StatefulSetUpdateStrategy
		wantPartition bool
	}{
		{name: "no strategy", wantPartition: true},
		{name: "RollingUpdate without parameters keeps none",
			strategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}},
		{name: "RollingUpdate with empty parameters", wantPartition: true,
			strategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{}}},
		{name: "OnDelete", strategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: template(), UpdateStrategy: tc.strategy,
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{}}}}
			StatefulSet(s)
			ru := s.Spec.UpdateStrategy.RollingUpdate
			if got := ru != nil && ru.Partition != nil && *ru.Partition == 0; got != tc.wantPartition {
				t.Errorf("partition 0: got %v, want %v", got, tc.wantPartition)
			}
			if s.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
				t.Errorf("podManagementPolicy: got %q, want OrderedReady", s.Spec.PodManagementPolicy)
			}
			p := s.Spec.PersistentVolumeClaimRetentionPolicy
			if p == nil || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				t.Errorf("persistentVolumeClaimRetentionPolicy: got %+v, want Retain/Retain", p)
			}
			if *s.Spec.Replicas != 1 || *s.Spec.RevisionHistoryLimit != 10 {
				t.Errorf("replicas, revisionHistoryLimit: got %d, %d, want 1, 10", *s.Spec.Replicas, *s.Spec.RevisionHistoryLimit)
			}
			if m := s.Spec.VolumeClaimTemplates[0].Spec.VolumeMode; m == nil || *m != corev1.PersistentVolumeFilesystem {
				t.Errorf("claim template volumeMode: got %v, want Filesystem", m)
			}
			checkTemplate(t, s.Spec.Template.Spec)
		})
	}
}

func TestDaemonSetDefaults(t *testing.T) {
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: template()}}
	DaemonSet(ds)
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil {
		t.Fatalf("updateStrategy: got %+v, want RollingUpdate with parameters", ds.Spec.UpdateStrategy)
	}
	if ru.MaxUnavailable.String() != "1" || ru.MaxSurge.String() != "0" {
		t.Errorf("maxUnavailable, maxSurge: got %s, %s, want 1, 0", ru.MaxUnavailable, ru.MaxSurge)
	}
	if *ds.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("revisionHistoryLimit: got %d, want 10", *ds.Spec.RevisionHistoryLimit)
	}
	checkTemplate(t, ds.Spec.Template.Spec)
	onDelete := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
	DaemonSet(onDelete)
	if onDelete.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("OnDelete: got rollingUpdate %+v, want none", onDelete.Spec.UpdateStrategy.RollingUpdate)
	}
}
