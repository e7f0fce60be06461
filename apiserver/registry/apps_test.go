package registry

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appsKind returns the served apps/v1 kind of the given resource.
func appsKind(t *testing.T, resource string) Kind {
	t.Helper()
	for _, k := range appsKinds() {
		if k.Resource == resource {
			return k
		}
	}
	t.Fatalf("no kind %s", resource)
	return Kind{}
}

func TestAppsKinds(t *testing.T) {
	for _, tc := range []struct {
		resource, short       string
		all, status, hasScale bool
	}{
		{"deployments", "deploy", true, true, true},
		{"replicasets", "rs", true, true, true},
		{"statefulsets", "sts", true, true, true},
		{"daemonsets", "ds", true, true, false},
		{"controllerrevisions", "", false, false, false},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			k := appsKind(t, tc.resource)
			short := ""
			if len(k.ShortNames) > 0 {
				short = k.ShortNames[0]
			}
			all := len(k.Categories) == 1 && k.Categories[0] == "all"
			if short != tc.short || all != tc.all || k.HasStatus != tc.status || k.HasScale != tc.hasScale || !k.Namespaced {
				t.Errorf("got short %q, all %v, status %v, scale %v, namespaced %v; want %q, %v, %v, %v, true",
					short, all, k.HasStatus, k.HasScale, k.Namespaced, tc.short, tc.all, tc.status, tc.hasScale)
			}
		})
	}
}

func TestDeploymentGeneration(t *testing.T) {
	st := newStrategy(appsKind(t, "deployments"))
	old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 4},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 3}}
	cases := []struct {
		name    string
		edit    func(*appsv1.Deployment)
		wantGen int64
	}{
		{name: "labels only", edit: func(d *appsv1.Deployment) { d.Labels = map[string]string{"a": "b"} }, wantGen: 4},
		{name: "annotation, as upstream", edit: func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{"kubernetes.io/change-cause": "x"}
		}, wantGen: 5},
		{name: "spec", edit: func(d *appsv1.Deployment) { d.Spec.Paused = true }, wantGen: 5},
		{name: "spec and annotation bump once", edit: func(d *appsv1.Deployment) {
			d.Spec.Paused, d.Annotations = true, map[string]string{"a": "b"}
		}, wantGen: 5},
		{name: "status is not the client's", edit: func(d *appsv1.Deployment) { d.Status.Replicas = 9 }, wantGen: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := old.DeepCopy()
			tc.edit(d)
			st.PrepareForUpdate(context.Background(), d, old)
			if d.Generation != tc.wantGen || d.Status.Replicas != 3 {
				t.Errorf("got generation %d, status.replicas %d, want %d, 3", d.Generation, d.Status.Replicas, tc.wantGen)
			}
		})
	}
}

func TestDaemonSetTemplateGeneration(t *testing.T) {
	st := newStrategy(appsKind(t, "daemonsets"))
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "7"}},
		Status: appsv1.DaemonSetStatus{NumberReady: 2}}
	st.PrepareForCreate(context.Background(), ds)
	if got := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; got != "1" || ds.Generation != 1 || ds.Status.NumberReady != 0 {
		t.Fatalf("create: got template generation %q, generation %d, numberReady %d, want 1, 1, 0", got, ds.Generation, ds.Status.NumberReady)
	}
	update := func(edit func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
		d := ds.DeepCopy()
		edit(d)
		st.PrepareForUpdate(context.Background(), d, ds)
		return d
	}
	cases := []struct {
		name         string
		edit         func(*appsv1.DaemonSet)
		wantTemplate string
		wantGen      int64
	}{
		{name: "template change", edit: func(d *appsv1.DaemonSet) {
			d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "v2"}}
		}, wantTemplate: "2", wantGen: 2},
		{name: "other spec change", edit: func(d *appsv1.DaemonSet) { d.Spec.MinReadySeconds = 5 }, wantTemplate: "1", wantGen: 2},
		{name: "client sets the annotation", edit: func(d *appsv1.DaemonSet) {
			d.Annotations[appsv1.DeprecatedTemplateGeneration] = "40"
		}, wantTemplate: "1", wantGen: 1},
		{name: "client drops the annotation", edit: func(d *appsv1.DaemonSet) { d.Annotations = nil }, wantTemplate: "1", wantGen: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := update(tc.edit)
			if got := d.Annotations[appsv1.DeprecatedTemplateGeneration]; got != tc.wantTemplate || d.Generation != tc.wantGen {
				t.Errorf("got template generation %q, generation %d, want %q, %d", got, d.Generation, tc.wantTemplate, tc.wantGen)
			}
		})
	}
}

func TestDaemonSetStatusUpdateKeepsTemplateGeneration(t *testing.T) {
	st := statusStrategy{newStrategy(appsKind(t, "daemonsets"))}
	old := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 3,
		Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "3"}}}
	for name, annotations := range map[string]map[string]string{
		"set":     {appsv1.DeprecatedTemplateGeneration: "1"},
		"dropped": nil,
	} {
		t.Run(name, func(t *testing.T) {
			d := old.DeepCopy()
			d.Annotations = annotations
			d.Status.NumberReady = 2
			st.PrepareForUpdate(context.Background(), d, old)
			if got := d.Annotations[appsv1.DeprecatedTemplateGeneration]; got != "3" || d.Status.NumberReady != 2 {
				t.Errorf("got template generation %q, numberReady %d, want the stored 3 and the writer's 2", got, d.Status.NumberReady)
			}
		})
	}
}

func TestDeploymentStatusUpdate(t *testing.T) {
	st := statusStrategy{newStrategy(appsKind(t, "deployments"))}
	old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2, Labels: map[string]string{"app": "web"}}}
	d := old.DeepCopy()
	d.Labels = map[string]string{"app": "other"}
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.Spec.Paused = true
	d.Status.ReadyReplicas = 3
	st.PrepareForUpdate(context.Background(), d, old)
	if d.Labels["app"] != "web" || d.Spec.Paused || d.Generation != 2 {
		t.Errorf("got labels %v, paused %v, generation %d, want the stored app=web, false, 2", d.Labels, d.Spec.Paused, d.Generation)
	}
	if d.Status.ReadyReplicas != 3 || d.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Errorf("got readyReplicas %d, annotations %v, want the writer's 3 and revision 1", d.Status.ReadyReplicas, d.Annotations)
	}
}
