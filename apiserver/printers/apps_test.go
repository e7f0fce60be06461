package printers

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func int32p(v int32) *int32 { return &v }

func twoContainers() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers:   []corev1.Container{{Name: "web", Image: "nginx:1.27"}, {Name: "log", Image: "busybox"}},
		NodeSelector: map[string]string{"disk": "ssd"},
	}}
}

func webSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

func TestDeploymentRows(t *testing.T) {
	runRowCases(t, gr("apps", "deployments"), []rowCase{
		{
			name: "rolling out",
			obj: &appsv1.Deployment{
				ObjectMeta: objectMeta("web", 5*time.Minute),
				Spec:       appsv1.DeploymentSpec{Replicas: int32p(3), Selector: webSelector(), Template: twoContainers()},
				Status:     appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2},
			},
			want: []any{"web", "2/3", int64(1), int64(2), "5m", "web,log", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "expression selector",
			obj: &appsv1.Deployment{
				ObjectMeta: objectMeta("api", time.Hour),
				Spec: appsv1.DeploymentSpec{Replicas: int32p(0), Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}},
			},
			want: []any{"api", "0/0", int64(0), int64(0), "60m", "", "", "tier"},
		},
	})
}

func TestReplicaSetRows(t *testing.T) {
	runRowCases(t, gr("apps", "replicasets"), []rowCase{
		{
			name: "scaling up",
			obj: &appsv1.ReplicaSet{
				ObjectMeta: objectMeta("web-5d4f8", 2*time.Hour),
				Spec:       appsv1.ReplicaSetSpec{Replicas: int32p(3), Selector: webSelector(), Template: twoContainers()},
				Status:     appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1},
			},
			want: []any{"web-5d4f8", int64(3), int64(2), int64(1), "120m", "web,log", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "no selector",
			obj:  &appsv1.ReplicaSet{ObjectMeta: objectMeta("bare", time.Minute), Spec: appsv1.ReplicaSetSpec{Replicas: int32p(1)}},
			want: []any{"bare", int64(1), int64(0), int64(0), "60s", "", "", "<none>"},
		},
	})
}

func TestStatefulSetRows(t *testing.T) {
	runRowCases(t, gr("apps", "statefulsets"), []rowCase{{
		name: "partly ready",
		obj: &appsv1.StatefulSet{
			ObjectMeta: objectMeta("db", 3*24*time.Hour),
			Spec:       appsv1.StatefulSetSpec{Replicas: int32p(3), Selector: webSelector(), Template: twoContainers()},
			Status:     appsv1.StatefulSetStatus{ReadyReplicas: 1},
		},
		want: []any{"db", "1/3", "3d", "web,log", "nginx:1.27,busybox"},
	}})
}

func TestDaemonSetRows(t *testing.T) {
	runRowCases(t, gr("apps", "daemonsets"), []rowCase{
		{
			name: "with node selector",
			obj: &appsv1.DaemonSet{
				ObjectMeta: objectMeta("agent", 10*time.Minute),
				Spec:       appsv1.DaemonSetSpec{Selector: webSelector(), Template: twoContainers()},
				Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2,
					UpdatedNumberScheduled: 1, NumberAvailable: 2},
			},
			want: []any{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), "disk=ssd", "10m", "web,log", "nginx:1.27,busybox", "app=web"},
		},
		{
			name: "every node",
			obj:  &appsv1.DaemonSet{ObjectMeta: objectMeta("all", time.Minute), Spec: appsv1.DaemonSetSpec{Selector: webSelector()}},
			want: []any{"all", int64(0), int64(0), int64(0), int64(0), int64(0), "<none>", "60s", "", "", "app=web"},
		},
	})
}

func TestControllerRevisionRows(t *testing.T) {
	yes, no := true, false
	revision := func(name string, refs ...metav1.OwnerReference) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(time.Hour),
			OwnerReferences: refs}, Revision: 2}
	}
	runRowCases(t, gr("apps", "controllerrevisions"), []rowCase{
		{
			name: "owned by a statefulset",
			obj:  revision("web-7b9c", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", Controller: &yes}),
			want: []any{"web-7b9c", "statefulset.apps/web", int64(2), "60m"},
		},
		{
			name: "owner that is not the controller",
			obj:  revision("orphan", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: &no}),
			want: []any{"orphan", "<none>", int64(2), "60m"},
		},
	})
}

func TestScaleRows(t *testing.T) {
	pinClock(t)
	s := &autoscalingv1.Scale{ObjectMeta: objectMeta("web", time.Hour),
		Spec: autoscalingv1.ScaleSpec{Replicas: 5}, Status: autoscalingv1.ScaleStatus{Replicas: 3, Selector: "app=web"}}
	table, err := ScaleConvertor.ConvertToTable(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, " "), "Name Desired Available Age"; got != want {
		t.Errorf("got columns %q, want %q", got, want)
	}
	if got, want := table.Rows[0].Cells, []any{"web", int64(5), int64(3), "60m"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got cells %#v, want %#v", got, want)
	}
}
