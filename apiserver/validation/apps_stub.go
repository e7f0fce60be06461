package validation

// This file holds the apps/v1 validation entry points with no rules, so the
// API server can serve the kinds before the rules land; the file that holds
// the rules replaces it.

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateDeployment checks a new Deployment.
func ValidateDeployment(d *appsv1.Deployment) field.ErrorList { return nil }

// ValidateDeploymentUpdate checks an update of a Deployment.
func ValidateDeploymentUpdate(newD, oldD *appsv1.Deployment) field.ErrorList { return nil }

// ValidateDeploymentStatusUpdate checks an update of a Deployment's status.
func ValidateDeploymentStatusUpdate(newD, oldD *appsv1.Deployment) field.ErrorList { return nil }

// ValidateReplicaSet checks a new ReplicaSet.
func ValidateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList { return nil }

// ValidateReplicaSetUpdate checks an update of a ReplicaSet.
func ValidateReplicaSetUpdate(newRS, oldRS *appsv1.ReplicaSet) field.ErrorList { return nil }

// ValidateReplicaSetStatusUpdate checks an update of a ReplicaSet's status.
func ValidateReplicaSetStatusUpdate(newRS, oldRS *appsv1.ReplicaSet) field.ErrorList { return nil }

// ValidateStatefulSet checks a new StatefulSet.
func ValidateStatefulSet(s *appsv1.StatefulSet) field.ErrorList { return nil }

// ValidateStatefulSetUpdate checks an update of a StatefulSet.
func ValidateStatefulSetUpdate(newS, oldS *appsv1.StatefulSet) field.ErrorList { return nil }

// ValidateStatefulSetStatusUpdate checks an update of a StatefulSet's status.
func ValidateStatefulSetStatusUpdate(newS, oldS *appsv1.StatefulSet) field.ErrorList { return nil }

// ValidateDaemonSet checks a new DaemonSet.
func ValidateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList { return nil }

// ValidateDaemonSetUpdate checks an update of a DaemonSet.
func ValidateDaemonSetUpdate(newDS, oldDS *appsv1.DaemonSet) field.ErrorList { return nil }

// ValidateDaemonSetStatusUpdate checks an update of a DaemonSet's status.
func ValidateDaemonSetStatusUpdate(newDS, oldDS *appsv1.DaemonSet) field.ErrorList { return nil }

// ValidateControllerRevision checks a new ControllerRevision.
func ValidateControllerRevision(r *appsv1.ControllerRevision) field.ErrorList { return nil }

// ValidateControllerRevisionUpdate checks an update of a ControllerRevision.
func ValidateControllerRevisionUpdate(newR, oldR *appsv1.ControllerRevision) field.ErrorList {
	return nil
}

// ValidateScale checks a write through a scale subresource.
func ValidateScale(s *autoscalingv1.Scale) field.ErrorList { return nil }
