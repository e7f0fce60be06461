package satoken

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	saadmission "portal.dev/portal/apiserver/admission/serviceaccount"
)

func tokenPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"},
		Spec: corev1.PodSpec{
			ServiceAccountName: "app",
			Volumes:            []corev1.Volume{{Name: "data"}, saadmission.TokenVolume("kube-api-access-abcde")},
			Containers: []corev1.Container{
				{Name: "app", VolumeMounts: []corev1.VolumeMount{
					{Name: "data", MountPath: "/data"},
					{Name: "kube-api-access-abcde", MountPath: saadmission.DefaultAPITokenMountPath, ReadOnly: true},
				}},
				{Name: "plain"},
			},
		},
	}
}

func TestMounts(t *testing.T) {
	pod := tokenPod()
	dir := func(v string) string { return "/state/" + v }
	got := Mounts(pod, &pod.Spec.Containers[0], dir)
	want := []MountPoint{{Source: "/state/kube-api-access-abcde", Target: saadmission.DefaultAPITokenMountPath}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if got := Mounts(pod, &pod.Spec.Containers[1], dir); len(got) != 0 {
		t.Errorf("container without the volume: got %v, want none", got)
	}
}

// TestSync writes a pod's token volume, leaves it alone before 80% of the
// token's life and refreshes it after.
func TestSync(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	client := fake.NewClientset()
	var requests []*authenticationv1.TokenRequest
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		req := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		requests = append(requests, req)
		exp := now.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)
		req.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", len(requests)), ExpirationTimestamp: metav1.NewTime(exp)}
		return true, req, nil
	})
	p := &Projector{Client: client, CA: []byte("CA PEM"), Now: func() time.Time { return now }}
	root := t.TempDir()
	dir := func(v string) string { return filepath.Join(root, v) }
	issued := Issued{}
	pod := tokenPod()

	next, err := p.Sync(context.Background(), pod, dir, issued)
	if err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(root, "kube-api-access-abcde")
	for name, want := range map[string]string{"token": "token-1", "ca.crt": "CA PEM", "namespace": "ns"} {
		data, err := os.ReadFile(filepath.Join(vol, name))
		if err != nil || string(data) != want {
			t.Errorf("%s: got %q (%v), want %q", name, data, err, want)
		}
	}
	if got, want := next, 3607*time.Second*8/10; got != want {
		t.Errorf("next refresh: got %v, want %v", got, want)
	}
	ref := requests[0].Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" || ref.Name != "web" || ref.UID != "pod-uid" {
		t.Errorf("bound object: got %+v, want the pod", ref)
	}
	if len(requests[0].Spec.Audiences) != 0 {
		t.Errorf("audiences: got %v, want none (the API's)", requests[0].Spec.Audiences)
	}

	now = now.Add(time.Hour / 2)
	if _, err := p.Sync(context.Background(), pod, dir, issued); err != nil {
		t.Fatal(err)
	}
	if len(requests) != 1 {
		t.Fatalf("requests before 80%%: got %d, want 1", len(requests))
	}
	now = now.Add(time.Hour / 2)
	if _, err := p.Sync(context.Background(), pod, dir, issued); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(vol, "token")); string(data) != "token-2" {
		t.Errorf("token after refresh: got %q, want token-2", data)
	}
	entries, _ := os.ReadDir(vol)
	if len(entries) != 3 {
		t.Errorf("volume holds %d entries, want 3 (no temporary files left)", len(entries))
	}
}

func TestVolumesIgnoresOthers(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "cm", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}},
		}}}},
		{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}}
	if got := Volumes(pod); len(got) != 0 {
		t.Errorf("got %v, want no token volumes", got)
	}
}
