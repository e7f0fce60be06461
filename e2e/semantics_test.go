package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/e2e/framework"
)

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web", "name": name}},
		Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"sleep", "1"}}}},
	}
}

// TestAPISemantics covers what clients rely on beyond the verbs: system
// namespaces, selectors, optimistic concurrency, status, namespace
// lifecycle, 410 Gone and metrics.
func TestAPISemantics(t *testing.T) {
	s := framework.StartServer(t, "--etcd-compaction-interval", "2s")
	ctx := context.Background()
	client := s.Client()

	t.Run("system namespaces and kubernetes service", func(t *testing.T) {
		for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
			if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
				t.Errorf("namespace %s: %v", ns, err)
			}
		}
		svc, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != "10.96.0.1" || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 443 {
			t.Fatalf("kubernetes service: got %s %+v", svc.Spec.ClusterIP, svc.Spec.Ports)
		}
		slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil || len(slice.Endpoints) != 1 || *slice.Ports[0].Port != int32(s.Port) {
			t.Fatalf("kubernetes endpointslice: %+v, %v", slice, err)
		}
		if _, err := s.Kubectl("delete", "namespace", "kube-system"); err == nil {
			t.Fatal("deleting kube-system succeeded; want it refused")
		}
	})

	t.Run("field and label selectors", func(t *testing.T) {
		pods := client.CoreV1().Pods("default")
		for i, node := range []string{"node-a", "node-b", "node-a"} {
			p, err := pods.Create(ctx, pod(fmt.Sprintf("p%d", i), node), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.PodIP = fmt.Sprintf("10.244.0.%d", i+1)
			if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			field, label string
			want         int
		}{
			{"spec.nodeName=node-a", "", 2},
			{"spec.nodeName=node-b,status.phase=Running", "", 1},
			{"status.podIP=10.244.0.3", "", 1},
			{"metadata.name=p1", "", 1},
			{"metadata.namespace=default", "name in (p0,p2)", 2},
			{"", "name!=p0", 2},
		} {
			list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: tc.field, LabelSelector: tc.label})
			if err != nil {
				t.Fatalf("field %q label %q: %v", tc.field, tc.label, err)
			}
			if len(list.Items) != tc.want {
				t.Errorf("field %q label %q: got %d pods, want %d", tc.field, tc.label, len(list.Items), tc.want)
			}
		}
		_, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=x"})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "spec.bogus") {
			t.Fatalf("unknown field selector: got %v, want 400 naming it", err)
		}
	})

	t.Run("pods/binding binds once", func(t *testing.T) {
		pods := client.CoreV1().Pods("default")
		p, err := pods.Create(ctx, pod("unbound", ""), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bind := func(node string) error {
			return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
				Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		}
		if err := bind("node-1"); err != nil {
			t.Fatalf("bind: %v", err)
		}
		got, _ := pods.Get(ctx, p.Name, metav1.GetOptions{})
		scheduled := false
		for _, c := range got.Status.Conditions {
			scheduled = scheduled || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue)
		}
		if got.Spec.NodeName != "node-1" || !scheduled {
			t.Fatalf("after bind: nodeName %q, PodScheduled %v", got.Spec.NodeName, scheduled)
		}
		if err := bind("node-2"); !apierrors.IsConflict(err) {
			t.Fatalf("second bind: got %v, want 409 Conflict", err)
		}
	})

	t.Run("stale resourceVersion conflicts", func(t *testing.T) {
		cm, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "occ"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale := cm.DeepCopy()
		cm.Data = map[string]string{"a": "1"}
		if _, err := client.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		stale.Data = map[string]string{"a": "2"}
		if _, err := client.CoreV1().ConfigMaps("default").Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("got %v, want 409 Conflict", err)
		}
	})

	t.Run("terminating namespace refuses new objects", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A finalizer nobody removes holds the namespace in Terminating.
		held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}
		if _, err := client.CoreV1().ConfigMaps("doomed").Create(ctx, held, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "free"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil || got.Status.Phase != corev1.NamespaceTerminating {
			t.Fatalf("after delete: got %v, %v; want Terminating", got.Status.Phase, err)
		}
		_, err = client.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "being terminated") {
			t.Fatalf("create in terminating namespace: got %v, want 403 being terminated", err)
		}
		waitFor(t, 20*time.Second, func() bool {
			_, err := client.CoreV1().ConfigMaps("doomed").Get(ctx, "free", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := client.CoreV1().ConfigMaps("doomed").Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() bool {
			_, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})

	t.Run("too old resourceVersion is 410 Gone", func(t *testing.T) {
		cms := client.CoreV1().ConfigMaps("default")
		for i := range 3 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("page-%d", i)}}
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		page, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil || page.Continue == "" {
			t.Fatalf("first page: continue %q, %v", page.Continue, err)
		}
		old := page.ResourceVersion
		for i := range 5 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("later-%d", i)}}
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Compaction runs every 2s here; once it passed the first page's
		// version, both the continue token and an exact read of it are 410.
		var lastErr error
		waitFor(t, 30*time.Second, func() bool {
			_, lastErr = cms.List(ctx, metav1.ListOptions{Limit: 1, Continue: page.Continue})
			return apierrors.IsResourceExpired(lastErr)
		})
		_, err = cms.List(ctx, metav1.ListOptions{ResourceVersion: old, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("exact list at a compacted version: got %v, want 410", err)
		}
	})

	t.Run("metrics by verb and resource", func(t *testing.T) {
		out := s.MustKubectl("get", "--raw", "/metrics")
		for _, want := range []string{`apiserver_request_total{`, `resource="configmaps"`, `verb="POST"`, `apiserver_request_duration_seconds_bucket{`} {
			if !strings.Contains(out, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}
