package workload

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

var stsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}

func TestTemplateHash(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "a"}}}}
	one, two := int32(1), int32(2)
	h := TemplateHash(tmpl, nil)
	if h != TemplateHash(tmpl.DeepCopy(), nil) {
		t.Errorf("equal templates hash differently")
	}
	other := tmpl.DeepCopy()
	other.Spec.Containers[0].Image = "b"
	seen := map[string]bool{}
	for _, got := range []string{h, TemplateHash(tmpl, &one), TemplateHash(tmpl, &two), TemplateHash(other, nil)} {
		if seen[got] {
			t.Errorf("hash %s repeats across templates and collision counts", got)
		}
		seen[got] = true
	}
}

func TestCreateRevisionResolvesCollisions(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "sts-uid"}
	client := fake.NewClientset()
	ctx := context.Background()
	var count int32
	rev := NewRevision(owner, stsKind, map[string]string{"app": "db"}, runtime.RawExtension{Raw: []byte(`{"a":1}`)}, 1)

	// Another object already holds the name the first revision would take.
	squatter := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{
		Name: RevisionName("db", RevisionHash(rev, &count)), Namespace: "ns"}}
	if _, err := client.AppsV1().ControllerRevisions("ns").Create(ctx, squatter, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := CreateRevision(ctx, client, owner, rev, &count)
	if err != nil {
		t.Fatal(err)
	}
	if count != 1 || got.Name != RevisionName("db", RevisionHash(rev, &count)) || got.Labels[RevisionHashLabel] != RevisionHash(rev, &count) {
		t.Errorf("got %s (labels %v) with collisionCount %d, want the name and label of count 1", got.Name, got.Labels, count)
	}
	again, err := CreateRevision(ctx, client, owner, rev, &count)
	if err != nil || again.Name != got.Name || count != 1 {
		t.Errorf("creating the same revision again: got %v, %v, count %d; want %s, nil, 1", again, err, count, got.Name)
	}
}

func TestHistory(t *testing.T) {
	var revs []*appsv1.ControllerRevision
	client := fake.NewClientset()
	for i := 5; i >= 1; i-- {
		r := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d", i), Namespace: "ns"}, Revision: int64(i)}
		if _, err := client.AppsV1().ControllerRevisions("ns").Create(context.Background(), r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, r)
	}
	if got := NextRevision(revs); got != 6 {
		t.Errorf("next revision: got %d, want 6", got)
	}
	if got := NextRevision(nil); got != 1 {
		t.Errorf("next revision of none: got %d, want 1", got)
	}
	SortRevisions(revs)
	if revs[0].Name != "r1" || revs[4].Name != "r5" {
		t.Errorf("sorted: got %s..%s, want r1..r5", revs[0].Name, revs[4].Name)
	}
	// r1 is live (Pods still run it); keep 2 of the others.
	if err := TruncateHistory(context.Background(), client, revs, map[string]bool{"r1": true}, 2); err != nil {
		t.Fatal(err)
	}
	list, err := client.AppsV1().ControllerRevisions("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, r := range list.Items {
		left = append(left, r.Name)
	}
	if fmt.Sprint(left) != "[r1 r4 r5]" {
		t.Errorf("after truncating: got %v, want [r1 r4 r5]", left)
	}
}
