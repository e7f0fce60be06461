package scheme

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestServedTypesAreTheirOwnInternalVersion(t *testing.T) {
	svc := &corev1.Service{}
	kinds, _, err := Scheme.ObjectKinds(svc)
	if err != nil {
		t.Fatal(err)
	}
	var internal, v1 bool
	for _, k := range kinds {
		internal = internal || k.Version == runtime.APIVersionInternal
		v1 = v1 || k.Version == "v1"
	}
	if !internal || !v1 {
		t.Fatalf("Service kinds: got %v, want v1 and __internal", kinds)
	}
	out, err := Scheme.ConvertToVersion(svc, schema.GroupVersion{Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.(*corev1.Service); !ok {
		t.Fatalf("conversion to v1: got %T, want *v1.Service", out)
	}
	if k, _, _ := Versioned.ObjectKinds(svc); len(k) != 1 {
		t.Fatalf("Versioned scheme kinds: got %v, want only v1", k)
	}
}

func TestFieldSelectors(t *testing.T) {
	pods := corev1.SchemeGroupVersion.WithKind("Pod")
	svcs := corev1.SchemeGroupVersion.WithKind("Service")
	for _, tc := range []struct {
		gvk     schema.GroupVersionKind
		label   string
		wantErr bool
	}{
		{pods, "spec.nodeName", false},
		{pods, "status.phase", false},
		{pods, "status.podIP", false},
		{pods, "metadata.name", false},
		{pods, "metadata.namespace", false},
		{pods, "spec.bogus", true},
		{svcs, "spec.clusterIP", false},
		{svcs, "spec.nodeName", true},
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "metadata.name", false},
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "data", true},
		{appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "status.replicas", false},
		{appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "metadata.namespace", false},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), "metadata.name", false},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), "status.replicas", true},
		{appsv1.SchemeGroupVersion.WithKind("StatefulSet"), "spec.serviceName", true},
		{appsv1.SchemeGroupVersion.WithKind("DaemonSet"), "metadata.name", false},
		{appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), "metadata.name", false},
	} {
		t.Run(tc.gvk.Kind+"/"+tc.label, func(t *testing.T) {
			_, _, err := Scheme.ConvertFieldLabel(tc.gvk, tc.label, "x")
			if (err != nil) != tc.wantErr {
				t.Fatalf("got %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestSelectableFields(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
	set := SelectableFields(pod, "p", "ns", true)
	for k, want := range map[string]string{"spec.nodeName": "n1", "status.phase": "Running",
		"status.podIP": "10.0.0.1", "metadata.name": "p", "metadata.namespace": "ns"} {
		if set[k] != want {
			t.Errorf("%s: got %q, want %q", k, set[k], want)
		}
	}
	rs := &appsv1.ReplicaSet{Status: appsv1.ReplicaSetStatus{Replicas: 3}}
	if got := SelectableFields(rs, "web-1", "ns", true)["status.replicas"]; got != "3" {
		t.Errorf("ReplicaSet status.replicas: got %q, want 3", got)
	}
	if _, ok := SelectableFields(&corev1.Node{}, "n", "", false)["metadata.namespace"]; ok {
		t.Error("cluster-scoped object has metadata.namespace")
	}
}

// TestScaleIsServable pins that the scale subresource's autoscaling/v1
// Scale converts to and from its internal version like the served kinds,
// and that no autoscaling resources are served for it.
func TestScaleIsServable(t *testing.T) {
	s := &autoscalingv1.Scale{}
	if _, err := Scheme.ConvertToVersion(s, autoscalingv1.SchemeGroupVersion); err != nil {
		t.Fatalf("Scale to autoscaling/v1: %v", err)
	}
	internal := schema.GroupVersion{Group: autoscalingv1.GroupName, Version: runtime.APIVersionInternal}
	if _, err := Scheme.ConvertToVersion(s, internal); err != nil {
		t.Fatalf("Scale to its internal version: %v", err)
	}
	for _, g := range Groups {
		if g.Version.Group == autoscalingv1.GroupName {
			t.Errorf("Groups serves %s, want only the Scale kind registered", g.Version)
		}
	}
}
