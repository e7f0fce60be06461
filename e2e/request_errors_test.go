package e2e

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/e2e/framework"
)

// TestClientErrorsAre4xx pins issue 23's small items: requests that are
// wrong answered 500, which tells a client the server failed and to try
// again.
func TestClientErrorsAre4xx(t *testing.T) {
	s := framework.StartServer(t)
	client := s.Client()
	ctx := t.Context()

	t.Run("watch with resourceVersion=abc", func(t *testing.T) {
		_, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: "abc"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("list: got %v (code %d), want 400", err, code(err))
		}
		w, err := client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "abc"})
		if err == nil {
			w.Stop()
		}
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "abc") {
			t.Errorf("watch: got %v (code %d), want 400 naming the resourceVersion", err, code(err))
		}
	})

	t.Run("server-side apply with an unknown field", func(t *testing.T) {
		const manifest = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "b"}, "bogus": 1}`
		for _, validation := range []string{"Strict", "Warn", "Ignore"} {
			err := client.CoreV1().RESTClient().Patch(types.ApplyPatchType).Namespace("default").
				Resource("configmaps").Name("applied").
				Param("fieldManager", "e2e").Param("fieldValidation", validation).
				Body([]byte(manifest)).Do(ctx).Error()
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), ".bogus: field not declared in schema") {
				t.Errorf("fieldValidation=%s: got %v (code %d), want 400 naming .bogus", validation, err, code(err))
			}
		}
		out, err := s.KubectlStdin(strings.Replace(manifest, "applied", "kubectl-applied", 1), "apply", "--server-side", "-f", "-")
		if err == nil || !strings.Contains(out, "(BadRequest)") {
			t.Errorf("kubectl apply --server-side: got %v\n%s\nwant a BadRequest", err, out)
		}
	})

	t.Run("server-side apply to the scale subresource with an unknown field", func(t *testing.T) {
		s.MustKubectl("create", "deployment", "scaled", "--image=registry.invalid/none")
		const scale = `{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "scaled"}, "spec": {"replicas": 2}, "bogus": 1}`
		err := client.AppsV1().RESTClient().Patch(types.ApplyPatchType).Namespace("default").
			Resource("deployments").Name("scaled").SubResource("scale").
			Param("fieldManager", "e2e").Body([]byte(scale)).Do(ctx).Error()
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), ".bogus: field not declared in schema") {
			t.Errorf("got %v (code %d), want 400 naming .bogus", err, code(err))
		}
	})
}

// code is the HTTP status an API error carries.
func code(err error) int32 {
	if status, ok := err.(apierrors.APIStatus); ok {
		return status.Status().Code
	}
	return 0
}
