package e2e

import (
	"context"
	"fmt"
	"strconv"
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
// scale, the table columns, `get all`, field selectors, explain, server-side
// apply and garbage collection of apps/v1 dependents.
func TestAppsAPI(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "namespace", "apps")
	k := func(args ...string) string {
		t.Helper()
		return s.MustKubectl(append([]string{"-n", "apps"}, args...)...)
	}

	t.Run("create deployment", func(t *testing.T) {
		// The created object as the server returned it: controllers may
		// move the generation later, not in this response.
		out := k("create", "deployment", "web", "--image=x", "--replicas=3", "-o", "jsonpath={.spec.replicas} {.metadata.generation} {.spec.strategy.type}")
		if out != "3 1 RollingUpdate" {
			t.Fatalf("created: got %q, want \"3 1 RollingUpdate\"", out)
		}
		k("get", "deploy,rs")
	})
	t.Run("scale", func(t *testing.T) {
		generation := func() int {
			n, err := strconv.Atoi(k("get", "deploy", "web", "-o", "jsonpath={.metadata.generation}"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := generation()
		if out := k("scale", "deploy/web", "--replicas=5"); !strings.Contains(out, "deployment.apps/web scaled") {
			t.Fatalf("got %q, want scaled", out)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"); got != "5" {
			t.Fatalf("replicas after scale: got %q, want 5", got)
		}
		if after := generation(); after <= before {
			t.Fatalf("generation after scale: got %d, want more than %d", after, before)
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
		if got := header(k("get", "deploy", "web", "--subresource=scale")); got != "NAME DESIRED AVAILABLE AGE" {
			t.Fatalf("get --subresource=scale: got header %q, want NAME DESIRED AVAILABLE AGE", got)
		}
		out, err := s.Kubectl("-n", "apps", "patch", "deploy", "web", "--subresource=scale", "--type=merge", "-p", `{"spec":{"replicas":-1}}`)
		checkInvalid(t, out, err, []string{"spec.replicas: Invalid value"})
	})
	t.Run("scale with a stale resourceVersion", func(t *testing.T) {
		stale := `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web","namespace":"apps","resourceVersion":"2"},"spec":{"replicas":7}}`
		out, err := s.KubectlStdin(stale, "replace", "--raw", "/apis/apps/v1/namespaces/apps/deployments/web/scale", "-f", "-")
		if err == nil || !strings.Contains(out, "the object has been modified") {
			t.Fatalf("got %q, %v, want a conflict", out, err)
		}
		if got := k("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"); got != "2" {
			t.Fatalf("replicas after a refused scale: got %q, want 2", got)
		}
	})
	testAppsTables(t, s)
	t.Run("explain", func(t *testing.T) {
		out := k("explain", "deployment.spec.strategy")
		for _, want := range []string{"FIELD: strategy <DeploymentStrategy>", "rollingUpdate", "maxSurge"} {
			if !strings.Contains(out+k("explain", "deployment.spec.strategy.rollingUpdate"), want) {
				t.Fatalf("explain: got %q, want %q in it", out, want)
			}
		}
	})
	testAppsServerSideApply(t, s)
	t.Run("garbage collection", func(t *testing.T) {
		// The collector finds apps/v1 owners and dependents through
		// discovery: a revision owned by the DaemonSet goes with it.
		k("delete", "daemonset", "agent")
		eventually(t, "controllerrevision agent-1 collected", func() (bool, string) {
			out, err := s.Kubectl("-n", "apps", "get", "controllerrevision", "agent-1")
			return err != nil && strings.Contains(out, "NotFound"), out
		})
	})
	t.Run("namespace deletion", func(t *testing.T) {
		// Deleting the namespace deletes its workloads: created again,
		// it holds none of them.
		s.MustKubectl("delete", "namespace", "apps", "--wait=true", "--timeout=60s")
		s.MustKubectl("create", "namespace", "apps")
		if out := k("get", "deploy,rs,sts,ds,controllerrevisions", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Fatalf("after the namespace was deleted and created again: got %q, want nothing", out)
		}
	})
}

// ownWorkload is workloadManifest with labels of its own (app=NAME), so
// that, once controllers run, no Deployment adopts its ReplicaSets or pods.
func ownWorkload(kind, name, extraSpec string) string {
	return strings.ReplaceAll(workloadManifest(kind, name, extraSpec, ""), "app: web", "app: "+name)
}

// header returns the first line of kubectl's table output, split into words.
func header(table string) string {
	return strings.Join(strings.Fields(strings.SplitN(table, "\n", 2)[0]), " ")
}

// testAppsTables creates one object of every apps/v1 kind and checks the
// columns, `kubectl get all` and the field selectors.
func testAppsTables(t *testing.T, s *framework.Server) {
	k := func(args ...string) string {
		t.Helper()
		return s.MustKubectl(append([]string{"-n", "apps"}, args...)...)
	}
	for _, m := range []string{
		ownWorkload("ReplicaSet", "lone", "replicas: 0"),
		ownWorkload("ReplicaSet", "pair", "replicas: 0"),
		ownWorkload("StatefulSet", "db", "serviceName: db"),
		ownWorkload("DaemonSet", "agent", ""),
	} {
		s.MustKubectlStdin(m, "-n", "apps", "apply", "-f", "-")
	}
	// The revision carries the DaemonSet's labels: the DaemonSet
	// controller, as upstream's, releases a revision its selector does not
	// match, and the checks below want it owned.
	uid := k("get", "daemonset", "agent", "-o", "jsonpath={.metadata.uid}")
	s.MustKubectlStdin(`apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: agent-1
  labels: {app: agent}
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: `+uid+`, controller: true}]
revision: 1
data: {spec: {template: {}}}
`, "-n", "apps", "apply", "-f", "-")

	t.Run("columns", func(t *testing.T) {
		for _, tc := range []struct{ args, want string }{
			{"deploy", "NAME READY UP-TO-DATE AVAILABLE AGE"},
			{"deploy -o wide", "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR"},
			{"rs", "NAME DESIRED CURRENT READY AGE"},
			{"rs -o wide", "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR"},
			{"sts", "NAME READY AGE"},
			{"sts -o wide", "NAME READY AGE CONTAINERS IMAGES"},
			{"ds", "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE"},
			{"ds -o wide", "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE CONTAINERS IMAGES SELECTOR"},
			{"controllerrevisions", "NAME CONTROLLER REVISION AGE"},
		} {
			if got := header(k(strings.Fields("get " + tc.args)...)); got != tc.want {
				t.Errorf("kubectl get %s: got header %q, want %q", tc.args, got, tc.want)
			}
		}
		if row := k("get", "controllerrevision", "agent-1", "--no-headers"); !strings.Contains(row, "daemonset.apps/agent") {
			t.Errorf("controllerrevision row: got %q, want its controller daemonset.apps/agent", row)
		}
		if row := k("get", "deploy", "web", "-o", "wide", "--no-headers"); !strings.Contains(row, "app=web") {
			t.Errorf("deployment wide row: got %q, want its selector app=web", row)
		}
	})
	t.Run("statefulset and replicaset scale", func(t *testing.T) {
		k("scale", "sts/db", "--replicas=2")
		k("scale", "rs/pair", "--replicas=2")
		if got := k("get", "sts/db", "rs/pair", "-o", "jsonpath={.items[*].spec.replicas}"); got != "2 2" {
			t.Errorf("replicas: got %q, want \"2 2\"", got)
		}
	})
	t.Run("daemonset template generation", func(t *testing.T) {
		get := func() string {
			return k("get", "ds", "agent", "-o", `jsonpath={.metadata.annotations.deprecated\.daemonset\.template\.generation}`)
		}
		if got := get(); got != "1" {
			t.Fatalf("on create: got %q, want 1", got)
		}
		k("set", "image", "ds/agent", "app=y")
		if got := get(); got != "2" {
			t.Fatalf("after a template change: got %q, want 2", got)
		}
	})
	t.Run("get all", func(t *testing.T) {
		out := k("get", "all", "-o", "name")
		for _, want := range []string{"deployment.apps/web", "replicaset.apps/lone", "statefulset.apps/db", "daemonset.apps/agent"} {
			if !strings.Contains(out, want) {
				t.Errorf("get all: got %q, want %s in it", out, want)
			}
		}
		if strings.Contains(out, "controllerrevision") {
			t.Errorf("get all: got %q, want no controllerrevisions (not in the category, as upstream)", out)
		}
	})
	t.Run("field selectors", func(t *testing.T) {
		if out := k("get", "rs", "--field-selector", "status.replicas=0,metadata.name=lone", "-o", "name"); strings.TrimSpace(out) != "replicaset.apps/lone" {
			t.Errorf("status.replicas=0: got %q, want replicaset.apps/lone", out)
		}
		if out := k("get", "rs", "--field-selector", "status.replicas=7", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("status.replicas=7: got %q, want nothing", out)
		}
		if out, err := s.Kubectl("-n", "apps", "get", "deploy", "--field-selector", "status.replicas=0"); err == nil || !strings.Contains(out, "field label not supported") {
			t.Errorf("deployments by status.replicas: got %q, %v, want refused as upstream", out, err)
		}
	})
}

// testAppsServerSideApply applies a Deployment server-side, then as another
// field manager: a changed replicas conflicts with the first manager, and
// after kubectl scale, with the manager of the scale subresource, as
// upstream.
func testAppsServerSideApply(t *testing.T, s *framework.Server) {
	apply := func(manifest string, args ...string) (string, error) {
		return s.KubectlStdin(manifest, append([]string{"-n", "apps", "apply", "--server-side", "-f", "-"}, args...)...)
	}
	m := ownWorkload("Deployment", "ssa", "replicas: 2")
	t.Run("server-side apply", func(t *testing.T) {
		if out, err := apply(m); err != nil || !strings.Contains(out, "serverside-applied") {
			t.Fatalf("first apply: got %q, %v", out, err)
		}
		three := strings.Replace(m, "replicas: 2", "replicas: 3", 1)
		out, err := apply(three, "--field-manager=other")
		if err == nil || !strings.Contains(out, `conflict with "kubectl"`) || !strings.Contains(out, ".spec.replicas") {
			t.Fatalf("apply by another manager: got %q, %v, want a conflict on .spec.replicas with kubectl", out, err)
		}
		if out, err := apply(three, "--field-manager=other", "--force-conflicts"); err != nil {
			t.Fatalf("forced apply: got %q, %v", out, err)
		}
		s.MustKubectl("-n", "apps", "scale", "deploy/ssa", "--replicas=4")
		out, err = apply(three, "--field-manager=other")
		if err == nil || !strings.Contains(out, `conflict with "kubectl" with subresource "scale"`) {
			t.Fatalf("apply after kubectl scale: got %q, %v, want a conflict with kubectl's scale", out, err)
		}
		if got := s.MustKubectl("-n", "apps", "get", "deploy", "ssa", "-o", "jsonpath={.spec.replicas}"); got != "4" {
			t.Fatalf("replicas: got %q, want 4", got)
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
	t.Run("StatefulSet serviceName fixed", func(t *testing.T) {
		out, err := s.KubectlStdin(workloadManifest("StatefulSet", "web", "serviceName: other\n", ""), "-n", ns, "apply", "-f", "-")
		checkInvalid(t, out, err, []string{"spec: Forbidden", "(changed: serviceName)"})
	})
	t.Run("ControllerRevision data immutable", func(t *testing.T) {
		const rev = "apiVersion: apps/v1\nkind: ControllerRevision\nmetadata: {name: web-1}\nrevision: 1\ndata: {spec: {replicas: %d}}\n"
		s.MustKubectlStdin(fmt.Sprintf(rev, 1), "-n", ns, "create", "-f", "-")
		out, err := s.KubectlStdin(fmt.Sprintf(rev, 2), "-n", ns, "replace", "-f", "-")
		checkInvalid(t, out, err, []string{"data: Invalid value", "field is immutable"})
	})
	t.Run("negative scale", func(t *testing.T) {
		ctx := context.Background()
		deploys := s.Client().AppsV1().Deployments(ns)
		scale, err := deploys.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = -1
		_, err = deploys.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
		checkCause(t, err, "spec.replicas")
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
		checkCause(t, err, "spec.template.metadata.labels")
	})
}

// checkCause fails t unless err is a 422 with exactly one cause, on field.
func checkCause(t *testing.T, err error, field string) {
	t.Helper()
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Code != 422 {
		t.Fatalf("got %v, want a 422", err)
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) != 1 || details.Causes[0].Field != field {
		t.Fatalf("causes: got %+v, want one on %s", details, field)
	}
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
