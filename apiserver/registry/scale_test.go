package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
)

func storedDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", ResourceVersion: "7"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}},
		Status: appsv1.DeploymentStatus{Replicas: 2},
	}
}

func TestScaleOf(t *testing.T) {
	cases := []struct {
		name string
		obj  runtime.Object
		want autoscalingv1.Scale
	}{
		{name: "deployment", obj: storedDeployment(3), want: autoscalingv1.Scale{
			Spec: autoscalingv1.ScaleSpec{Replicas: 3}, Status: autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web,tier=front"}}},
		{name: "replicaset with expressions", obj: &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}}},
			want: autoscalingv1.Scale{Status: autoscalingv1.ScaleStatus{Selector: "app in (a,b)"}}},
		{name: "statefulset", obj: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptrTo[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}, Status: appsv1.StatefulSetStatus{Replicas: 4}},
			want: autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}, Status: autoscalingv1.ScaleStatus{Replicas: 4, Selector: "app=db"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scaleOf(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec != tc.want.Spec || got.Status != tc.want.Status {
				t.Errorf("got spec %+v status %+v, want spec %+v status %+v", got.Spec, got.Status, tc.want.Spec, tc.want.Status)
			}
		})
	}
	if _, err := scaleOf(&appsv1.DaemonSet{}); err == nil {
		t.Errorf("DaemonSet: got a Scale, want an error")
	}
}

func TestScaleUpdate(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments/scale"}
	cases := []struct {
		name         string
		stored       *appsv1.Deployment
		edit         func(*autoscalingv1.Scale)
		wantReplicas int32
		wantRV       string
		wantErr      func(error) bool
	}{
		{name: "replicas and resourceVersion move to the parent", stored: storedDeployment(3),
			edit: func(s *autoscalingv1.Scale) { s.Spec.Replicas = 5 }, wantReplicas: 5, wantRV: "7"},
		{name: "no resourceVersion writes unconditionally", stored: storedDeployment(3),
			edit: func(s *autoscalingv1.Scale) { s.Spec.Replicas, s.ResourceVersion = 0, "" }, wantReplicas: 0, wantRV: ""},
		{name: "another UID conflicts", stored: storedDeployment(3),
			edit: func(s *autoscalingv1.Scale) { s.UID = "uid-2" }, wantErr: apierrors.IsConflict},
		{name: "missing parent", stored: &appsv1.Deployment{},
			edit: func(s *autoscalingv1.Scale) {}, wantErr: apierrors.IsNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := &scaleUpdate{name: "web", resource: gr, req: rest.DefaultUpdatedObjectInfo(nil,
				func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
					s := oldObj.DeepCopyObject().(*autoscalingv1.Scale)
					tc.edit(s)
					return s, nil
				})}
			before := tc.stored.DeepCopy()
			obj, err := u.UpdatedObject(context.Background(), tc.stored)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("got error %v, want another", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := obj.(*appsv1.Deployment)
			if *d.Spec.Replicas != tc.wantReplicas || d.ResourceVersion != tc.wantRV {
				t.Errorf("got replicas %d, resourceVersion %q, want %d, %q", *d.Spec.Replicas, d.ResourceVersion, tc.wantReplicas, tc.wantRV)
			}
			if *tc.stored.Spec.Replicas != *before.Spec.Replicas {
				t.Errorf("the stored object changed: got replicas %d, want %d", *tc.stored.Spec.Replicas, *before.Spec.Replicas)
			}
		})
	}
}

// TestScaleApplyUnknownFieldIsBadRequest pins a review finding on issue 23:
// a server-side apply to the scale subresource naming a field Scale does
// not have answered 500, while the main resource answered 400.
func TestScaleApplyUnknownFieldIsBadRequest(t *testing.T) {
	const msg = "failed to create typed patch object (autoscaling/v1, Kind=Scale): .bogus: field not declared in schema"
	u := &scaleUpdate{name: "web", resource: schema.GroupResource{Group: "apps", Resource: "deployments/scale"},
		req: rest.DefaultUpdatedObjectInfo(nil, func(context.Context, runtime.Object, runtime.Object) (runtime.Object, error) {
			return nil, errors.New(msg)
		})}
	_, err := u.UpdatedObject(context.Background(), storedDeployment(3))
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), ".bogus: field not declared in schema") {
		t.Errorf("got %v, want 400 naming .bogus", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
