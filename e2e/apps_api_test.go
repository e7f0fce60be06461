package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
)

// TestAppsAPI drives an unmodified kubectl through the apps/v1 API of
// `portal server` (no controllers are needed for what it checks): create,
// the table columns, explain, scale and server-side apply.
func TestAppsAPI(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "namespace", "apps")
	k := func(args ...string) string {
		t.Helper()
		return s.MustKubectl(append([]string{"-n", "apps"}, args...)...)
	}

	t.Run("create deployment", func(t *testing.T) {
		if out := k("create", "deployment", "web", "--image=x", "--replicas=3"); !strings.Contains(out, "deployment.apps/web created") {
			t.Fatalf("got %q, want created", out)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "3 1" {
			t.Fatalf("replicas and generation: got %q, want \"3 1\"", got)
		}
		k("get", "deploy,rs")
	})
	t.Run("scale", func(t *testing.T) {
		if out := k("scale", "deploy/web", "--replicas=5"); !strings.Contains(out, "deployment.apps/web scaled") {
			t.Fatalf("got %q, want scaled", out)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "5 2" {
			t.Fatalf("replicas and generation after scale: got %q, want \"5 2\"", got)
		}
		if out, err := s.Kubectl("-n", "apps", "scale", "deploy/web", "--current-replicas=3", "--replicas=1"); err == nil {
			t.Fatalf("scale with a stale --current-replicas: got success %q, want a refusal", out)
		}
		if out := k("scale", "deploy/web", "--current-replicas=5", "--replicas=2"); !strings.Contains(out, "scaled") {
			t.Fatalf("scale with a matching --current-replicas: got %q", out)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"); got != "2" {
			t.Fatalf("replicas: got %q, want 2", got)
		}
		scale := k("get", "--raw", "/apis/apps/v1/namespaces/apps/deployments/web/scale")
		for _, want := range []string{`"kind":"Scale"`, `"apiVersion":"autoscaling/v1"`, `"selector":"app=web"`, `"replicas":2`} {
			if !strings.Contains(scale, want) {
				t.Fatalf("scale subresource: got %s, want %s in it", scale, want)
			}
		}
	})
}

// TestAppsValidation: well-formed workloads of every kind are accepted as
// kubectl sends them, and the bad input gets a 422 naming the field.
func TestAppsValidation(t *testing.T) {
	s := framework.StartServer(t)
	const ns = "appsval"
	s.MustKubectl("create", "namespace", ns)

	t.Run("valid workloads accepted", func(t *testing.T) {
		for _, m := range []string{
			workloadManifest("Deployment", "web", "", ""),
			workloadManifest("ReplicaSet", "web-1", "", ""),
			workloadManifest("StatefulSet", "web", "serviceName: nginx\n", ""),
			workloadManifest("DaemonSet", "agent", "", ""),
		} {
			s.MustKubectlStdin(m, "-n", ns, "apply", "-f", "-")
		}
	})
	t.Run("rejections", func(t *testing.T) {
		testRejections(t, s, ns, appsRejections())
	})
	t.Run("selector immutable", func(t *testing.T) {
		out, err := s.KubectlStdin(workloadManifest("Deployment", "web", "", "tier: front"), "-n", ns, "apply", "-f", "-")
		checkInvalid(t, out, err, []string{"spec.selector: Invalid value", "field is immutable"})
	})
	t.Run("422 cause names the field", func(t *testing.T) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "mismatch"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}},
				},
			},
		}
		_, err := s.Client().AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{})
		status, ok := err.(apierrors.APIStatus)
		if !ok || status.Status().Code != 422 {
			t.Fatalf("got %v, want a 422", err)
		}
		details := status.Status().Details
		if details == nil || len(details.Causes) != 1 || details.Causes[0].Field != "spec.template.metadata.labels" {
			t.Fatalf("causes: got %+v, want one on spec.template.metadata.labels", details)
		}
	})
}

// workloadManifest is a kind of workload selecting app=web, with extra
// spec lines (indented by two spaces, "\n"-separated) and an extra
// selector label.
func workloadManifest(kind, name, extraSpec, extraSelector string) string {
	sel := "app: web"
	if extraSelector != "" {
		sel += ", " + extraSelector
	}
	spec := strings.ReplaceAll(strings.TrimSuffix(extraSpec, "\n"), "\n", "\n  ")
	if spec != "" {
		spec = "  " + spec + "\n"
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: %s
metadata: {name: %s}
spec:
%s  selector: {matchLabels: {%s}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec: {containers: [{name: app, image: x, command: [sleep, "3600"]}]}
`, kind, name, spec, sel)
}

func appsRejections() []rejection {
	w := workloadManifest
	return []rejection{
		{name: "selector not matching template labels", manifest: strings.Replace(w("Deployment", "mismatch", "", ""), "{app: web, tier", "{app: api, tier", 1),
			want: []string{"spec.template.metadata.labels: Invalid value", "`selector` does not match template `labels`"}},
		{name: "negative replicas", manifest: w("ReplicaSet", "negative", "replicas: -1", ""),
			want: []string{"spec.replicas: Invalid value", "must be greater than or equal to 0"}},
		{name: "maxSurge and maxUnavailable both 0", manifest: w("Deployment", "stuck", "strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 0}}", ""),
			want: []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value", "may not be 0 when `maxSurge` is 0"}},
		{name: "percent over 100%", manifest: w("Deployment", "over", "strategy: {rollingUpdate: {maxUnavailable: 150%}}", ""),
			want: []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value", "must not be greater than 100%"}},
		{name: "DaemonSet both budgets 0", manifest: w("DaemonSet", "idle", "updateStrategy: {rollingUpdate: {maxUnavailable: 0}}", ""),
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Required value"}},
		{name: "StatefulSet name too long", manifest: w("StatefulSet", strings.Repeat("s", 53), "", ""),
			want: []string{"metadata.name: Invalid value", "must be no more than 52 characters"}},
		{name: "StatefulSet volume claims", manifest: w("StatefulSet", "claims", "volumeClaimTemplates: [{metadata: {name: www}}]", ""),
			want: []string{"spec.volumeClaimTemplates: Forbidden", "Portal has no storage"}},
		{name: "template restartPolicy Never", manifest: strings.Replace(w("Deployment", "never", "", ""), "spec: {containers", "spec: {restartPolicy: Never, containers", 1),
			want: []string{`spec.template.spec.restartPolicy: Unsupported value: "Never"`}},
	}
}
