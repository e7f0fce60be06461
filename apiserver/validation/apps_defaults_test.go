package validation_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/apiserver/defaults"
	"portal.dev/portal/apiserver/validation"
)

// TestDefaultedWorkloadsAreValid: what a user writes with only the
// required fields (as `kubectl create deployment` does) becomes valid once
// the server's defaults are applied, for every workload kind. A default
// that validation refuses would make the kind impossible to create.
func TestDefaultedWorkloadsAreValid(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "ns"} }
	sel := func() *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	tmpl := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x", Command: []string{"sleep", "3600"}}}},
		}
	}
	cases := []struct {
		name string
		run  func() error
	}{
		{"Deployment", func() error {
			d := &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Selector: sel(), Template: tmpl()}}
			defaults.Deployment(d)
			return validation.ValidateDeployment(d).ToAggregate()
		}},
		{"ReplicaSet", func() error {
			rs := &appsv1.ReplicaSet{ObjectMeta: meta("web-1"), Spec: appsv1.ReplicaSetSpec{Selector: sel(), Template: tmpl()}}
			defaults.ReplicaSet(rs)
			return validation.ValidateReplicaSet(rs).ToAggregate()
		}},
		{"StatefulSet", func() error {
			s := &appsv1.StatefulSet{ObjectMeta: meta("web"), Spec: appsv1.StatefulSetSpec{Selector: sel(), Template: tmpl(), ServiceName: "nginx"}}
			defaults.StatefulSet(s)
			return validation.ValidateStatefulSet(s).ToAggregate()
		}},
		{"DaemonSet", func() error {
			ds := &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{Selector: sel(), Template: tmpl()}}
			defaults.DaemonSet(ds)
			return validation.ValidateDaemonSet(ds).ToAggregate()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err != nil {
				t.Errorf("got %v, want a defaulted %s to be valid", err, tc.name)
			}
		})
	}
}
