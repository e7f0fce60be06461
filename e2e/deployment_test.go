package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
)

// webServer answers every GET with its pod's name. On SIGTERM it keeps
// serving for 3 s before it exits, as real servers drain: the pod's
// endpoint leaves the proxies' rules a moment after the pod starts
// terminating, and a request routed to it in that moment must still be
// answered. A server that exited at once would fail those requests, and
// the test would blame the rollout for them.
const webServer = `
import http.server, os, signal, threading
name = os.environ["POD_NAME"].encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(name)))
        self.end_headers()
        self.wfile.write(name)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("", 8080), Handler)
signal.signal(signal.SIGTERM, lambda *_: threading.Timer(3, lambda: os._exit(0)).start())
server.serve_forever()
`

// clientScript calls the Service web by its short name, as the seeds'
// frontend does, one line per request: "LOOP <pod that answered> <status>".
const clientScript = `while true; do echo "LOOP $(curl -s -m 2 -w ' %{http_code}' http://web/)"; sleep 0.05; done`

// webDeployment is the Deployment web: replicas of webServer.
func webDeployment(replicas int32) *appsv1.Deployment {
	return httpDeployment("web", replicas, corev1.Container{Name: "web", Image: "web:v1", Command: []string{"python3", "-c", webServer}})
}

// httpDeployment is the Deployment name: replicas pods labelled app=name,
// each running c, which serves HTTP on port 8080 (named http) and answers
// GET / once ready, with the pod's name in POD_NAME. They are rolled with
// maxSurge 1 and maxUnavailable 0, so a rollout never lowers the ready
// count, and are given 10 s to drain.
func httpDeployment(name string, replicas int32, c corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	c.Env = append(c.Env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers:                    []corev1.Container{c},
				},
			},
		},
	}
}

// apply sends obj through `kubectl apply`, as a user's manifest.
func apply(t *testing.T, s *framework.Server, obj any) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	s.MustKubectlStdin(string(data), "apply", "-f", "-")
}

// TestDeployment is the seeds' scenario with a Deployment: three replicas
// behind the Service web, a client pod calling it by name in a loop, and
// what a user does to them with kubectl.
func TestDeployment(t *testing.T) {
	wb := newWorkloadBed(t, false, "ingress")
	s, c := wb.server, wb.c
	ctx := context.Background()
	apply(t, s, webDeployment(3))
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	apply(t, s, svc)
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Labels: map[string]string{"app": "client"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "curl", Command: []string{"sh", "-c", clientScript}}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitComplete(t, c, "default", "web", 2*time.Minute)
	firstHash := first.current().Labels[appsv1.DefaultDeploymentUniqueLabelKey]

	t.Run("three replicas serve the client", func(t *testing.T) {
		waitReadyEndpoints(t, c, 3)
		eventuallyWithin(t, time.Minute, "the client answered by every replica", func() (bool, string) {
			seen := map[string]int{}
			for _, r := range clientResults(s) {
				seen[r.pod]++
			}
			for _, p := range live(first.pods) {
				if seen[p.Name] == 0 {
					return false, fmt.Sprintf("answers per pod %v, none from %s", seen, p.Name)
				}
			}
			return true, ""
		})
	})

	t.Run("a deleted replica is replaced and joins the endpoints", func(t *testing.T) {
		victim := live(first.pods)[0].Name
		s.MustKubectl("delete", "pod", victim, "--wait=false")
		// Right after the delete the slices may not show it yet: wait for
		// three ready endpoints without the victim, not for any three.
		var eps map[string]bool
		eventuallyWithin(t, 2*time.Minute, "3 ready endpoints without "+victim, func() (bool, string) {
			eps = readyEndpoints(t, c)
			return len(eps) == 3 && !eps[victim], fmt.Sprintf("ready %v", eps)
		})
		r := waitComplete(t, c, "default", "web", time.Minute)
		for _, p := range live(r.pods) {
			if !eps[p.Name] {
				t.Errorf("pod %s is not among the ready endpoints %v", p.Name, eps)
			}
		}
	})

	t.Run("scale to 5 then 2, the endpoints follow", func(t *testing.T) {
		s.MustKubectl("scale", "deployment/web", "--replicas=5")
		waitReadyEndpoints(t, c, 5)
		waitComplete(t, c, "default", "web", time.Minute)
		s.MustKubectl("scale", "deployment/web", "--replicas=2")
		waitReadyEndpoints(t, c, 2)
		r := waitComplete(t, c, "default", "web", time.Minute)
		// The pods scaled away leave the slices once they have drained.
		eventuallyWithin(t, time.Minute, "only the two replicas in the slices", func() (bool, string) {
			eps, _ := endpointsOf(t, c, "default", "web")
			return len(eps) == 2, fmt.Sprintf("%d endpoints", len(eps))
		})
		if n := len(live(r.pods)); n != 2 {
			t.Fatalf("got %d live pods, want 2", n)
		}
	})

	t.Run("set image rolls out with no failed request", func(t *testing.T) {
		before := len(clientResults(s))
		s.MustKubectl("set", "image", "deployment/web", "web=web:v2")
		// rollout status waits for the rollout and exits 0 when it is done.
		if out, err := kubectlFor(t, s, 3*time.Minute, "rollout", "status", "deployment/web", "--timeout=170s"); err != nil {
			t.Fatalf("kubectl rollout status: %v\n%s", err, out)
		}
		r := waitComplete(t, c, "default", "web", 10*time.Second)
		for _, p := range live(r.pods) {
			if img := p.Spec.Containers[0].Image; img != "web:v2" {
				t.Errorf("pod %s runs image %s, want web:v2", p.Name, img)
			}
		}
		checkNoFailedRequest(t, s, before, r)
	})

	t.Run("rollout undo returns to the previous revision", func(t *testing.T) {
		before := len(clientResults(s))
		s.MustKubectl("rollout", "undo", "deployment/web")
		if out, err := kubectlFor(t, s, 3*time.Minute, "rollout", "status", "deployment/web", "--timeout=170s"); err != nil {
			t.Fatalf("kubectl rollout status: %v\n%s", err, out)
		}
		r := waitComplete(t, c, "default", "web", 10*time.Second)
		// Upstream undoes by copying revision 1's template back, so the
		// first ReplicaSet comes back as revision 3.
		if img := r.deploy.Spec.Template.Spec.Containers[0].Image; img != "web:v1" {
			t.Errorf("template image after undo: got %s, want web:v1", img)
		}
		if rev := r.deploy.Annotations[revisionAnnotation]; rev != "3" {
			t.Errorf("deployment revision after undo: got %q, want 3", rev)
		}
		if hash := r.current().Labels[appsv1.DefaultDeploymentUniqueLabelKey]; hash != firstHash {
			t.Errorf("current ReplicaSet after undo: got pod-template-hash %s, want the first one's %s", hash, firstHash)
		}
		for _, p := range live(r.pods) {
			if img, hash := p.Spec.Containers[0].Image, p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; img != "web:v1" || hash != firstHash {
				t.Errorf("pod %s: got image %s hash %s, want web:v1 and %s", p.Name, img, hash, firstHash)
			}
		}
		// Revision 1 became 3: the history lists 2 and 3.
		var revs []string
		for _, line := range strings.Split(s.MustKubectl("rollout", "history", "deployment/web"), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 && f[0] != "REVISION" {
				revs = append(revs, f[0])
			}
		}
		if strings.Join(revs, " ") != "2 3" {
			t.Errorf("rollout history: got revisions %v, want [2 3]", revs)
		}
		checkNoFailedRequest(t, s, before, r)
	})

	t.Run("rollout status fails on a stuck rollout", func(t *testing.T) {
		testStuckRollout(t, s, c)
	})
}

// testStuckRollout: a Deployment whose pods never pass their readiness
// probe makes `kubectl rollout status` exit non-zero once its
// progressDeadlineSeconds have passed, not at kubectl's own timeout.
func testStuckRollout(t *testing.T, s *framework.Server, c kubernetes.Interface) {
	labels := map[string]string{"app": "stuck"}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "stuck"},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To[int32](1),
			ProgressDeadlineSeconds: ptr.To[int32](5),
			Selector:                &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: "main", Image: "stuck", Command: []string{"sleep", "3600"},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
						ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}}}}},
		},
	}
	apply(t, s, d)
	start := time.Now()
	out, err := kubectlFor(t, s, 3*time.Minute, "rollout", "status", "deployment/stuck", "--timeout=170s")
	if err == nil {
		t.Fatalf("kubectl rollout status of a stuck rollout exited 0:\n%s", out)
	}
	if !strings.Contains(out, `deployment "stuck" exceeded its progress deadline`) {
		t.Fatalf("kubectl rollout status: got %v\n%s\nwant it to say the progress deadline was exceeded", err, out)
	}
	t.Logf("rollout status gave up after %v", time.Since(start).Round(100*time.Millisecond))
	got, err := c.AppsV1().Deployments("default").Get(context.Background(), "stuck", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range got.Status.Conditions {
		if cond.Type == appsv1.DeploymentProgressing {
			if cond.Status != corev1.ConditionFalse || cond.Reason != "ProgressDeadlineExceeded" {
				t.Errorf("Progressing condition: got %s %s, want False ProgressDeadlineExceeded", cond.Status, cond.Reason)
			}
			return
		}
	}
	t.Errorf("no Progressing condition in %+v", got.Status.Conditions)
}

// result is one request of the client: the pod that answered and the
// HTTP status ("000" when the request failed).
type result struct{ pod, status string }

// clientResults are the client pod's requests so far, read with
// `kubectl logs` (pods/log through the agent).
func clientResults(s *framework.Server) []result {
	out, _ := s.Kubectl("logs", "client")
	var res []result
	for _, line := range strings.Split(out, "\n") {
		if f, ok := strings.CutPrefix(line, "LOOP "); ok {
			fields := strings.Fields(f)
			if len(fields) == 2 {
				res = append(res, result{fields[0], fields[1]})
			} else if len(fields) == 1 {
				res = append(res, result{"", fields[0]})
			}
		}
	}
	return res
}

// checkNoFailedRequest waits until the client has made at least 20
// requests since the first `before` ones, the latest answered by the
// rollout's current pods, and checks that none failed.
func checkNoFailedRequest(t *testing.T, s *framework.Server, before int, r rollout) {
	t.Helper()
	current := map[string]bool{}
	for _, p := range live(r.pods) {
		current[p.Name] = true
	}
	var during []result
	eventuallyWithin(t, time.Minute, "the client answered by the new pods", func() (bool, string) {
		all := clientResults(s)
		if len(all) < before {
			return false, fmt.Sprintf("kubectl logs gave %d requests, fewer than the %d before", len(all), before)
		}
		during = all[before:]
		last := during[max(0, len(during)-5):]
		for _, r := range last {
			if !current[r.pod] {
				return false, fmt.Sprintf("latest answers %v, want all from %v", last, current)
			}
		}
		return len(during) >= 20, fmt.Sprintf("%d requests", len(during))
	})
	var failed []result
	for _, r := range during {
		if r.status != "200" {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		t.Errorf("client: %d of %d requests failed during the rollout %v; want none", len(failed), len(during), failed)
		return
	}
	t.Logf("%d requests during the rollout, all answered", len(during))
}

// waitReadyEndpoints waits until the Service web has exactly n ready
// endpoints and returns their pods' names.
func waitReadyEndpoints(t *testing.T, c kubernetes.Interface, n int) map[string]bool {
	t.Helper()
	var ready map[string]bool
	eventuallyWithin(t, 2*time.Minute, fmt.Sprintf("%d ready endpoints", n), func() (bool, string) {
		ready = readyEndpoints(t, c)
		return len(ready) == n, fmt.Sprintf("ready %v", ready)
	})
	return ready
}

// readyEndpoints returns the names of the pods Service web's slices hold
// as ready.
func readyEndpoints(t *testing.T, c kubernetes.Interface) map[string]bool {
	t.Helper()
	eps, _ := endpointsOf(t, c, "default", "web")
	ready := map[string]bool{}
	for _, ep := range eps {
		if ptr.Deref(ep.Conditions.Ready, false) && ep.TargetRef != nil {
			ready[ep.TargetRef.Name] = true
		}
	}
	return ready
}

// TestDeploymentSurvivesControllerManagerKill: the controller-manager
// killed with SIGKILL halfway through a rolling update, then started
// again, finishes the rollout; a sampler listing the pods all along never
// sees more than replicas+maxSurge of them live.
func TestDeploymentSurvivesControllerManagerKill(t *testing.T) {
	wb := newWorkloadBed(t, true, "dns", "proxy", "ingress")
	s, c := wb.server, wb.c
	const replicas, maxSurge = 4, 1
	labels := map[string]string{"app": "roll"}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "roll"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			// Each step waits 2 s for its new pod to count as available,
			// which leaves time to kill the controller-manager mid-way.
			MinReadySeconds: 2,
			Selector:        &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(maxSurge)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](2),
				Containers:                    []corev1.Container{{Name: "main", Image: "roll:v1", Command: []string{"sleep", "3600"}}}}},
		},
	}
	apply(t, s, d)
	waitComplete(t, c, "default", "roll", 2*time.Minute)

	sampler := samplePods(t, c, "app=roll")
	s.MustKubectl("set", "image", "deployment/roll", "main=roll:v2")
	eventuallyWithin(t, time.Minute, "the rollout under way", func() (bool, string) {
		r, err := getRollout(t, c, "default", "roll")
		if err != nil {
			return false, err.Error()
		}
		cur := r.current()
		if cur == nil || cur.Spec.Template.Spec.Containers[0].Image != "roll:v2" {
			return false, "no ReplicaSet for roll:v2 yet"
		}
		// Past the first step, so old pods have gone and new ones come.
		return cur.Status.Replicas >= 2 && cur.Status.AvailableReplicas < replicas,
			fmt.Sprintf("new ReplicaSet: %d pods, %d available", cur.Status.Replicas, cur.Status.AvailableReplicas)
	})
	wb.killControllerManager()
	mid, _ := getRollout(t, c, "default", "roll")
	_, why := mid.complete()
	t.Logf("controller-manager killed mid-rollout: %s", why)
	wb.startControllerManager()

	r := waitComplete(t, c, "default", "roll", 3*time.Minute)
	if out, err := kubectlFor(t, s, time.Minute, "rollout", "status", "deployment/roll", "--timeout=50s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s", err, out)
	}
	most, when := sampler.stop()
	if most > replicas+maxSurge {
		t.Errorf("sampled %d live pods at once, want at most replicas+maxSurge = %d: %s", most, replicas+maxSurge, when)
	}
	t.Logf("at most %d live pods during the rollout (%d samples)", most, sampler.samples)
	if len(r.sets) != 2 {
		t.Errorf("got %d ReplicaSets, want 2 (the restarted controller must find its own, not make another)", len(r.sets))
	}
	for _, p := range live(r.pods) {
		if p.Spec.Containers[0].Image != "roll:v2" {
			t.Errorf("pod %s: got image %s, want roll:v2", p.Name, p.Spec.Containers[0].Image)
		}
	}
}

// podSampler lists pods without pause and keeps the most live ones it saw.
type podSampler struct {
	halt    atomic.Bool
	done    sync.WaitGroup
	most    int
	when    string
	samples int
}

func samplePods(t *testing.T, c kubernetes.Interface, selector string) *podSampler {
	ps := &podSampler{}
	ps.done.Add(1)
	go func() {
		defer ps.done.Done()
		// Each list runs to its end: a stop flag, not a cancelled
		// context, so stopping never cuts a response short.
		for !ps.halt.Load() {
			list, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				continue
			}
			ps.samples++
			if l := live(list.Items); len(l) > ps.most {
				var names []string
				for _, p := range l {
					names = append(names, p.Name)
				}
				ps.most, ps.when = len(l), fmt.Sprintf("%v at resourceVersion %s", names, list.ResourceVersion)
			}
		}
	}()
	t.Cleanup(ps.stopQuietly)
	return ps
}

func (ps *podSampler) stopQuietly() { ps.halt.Store(true); ps.done.Wait() }

// stop ends the sampling and returns the most live pods seen, and which.
func (ps *podSampler) stop() (int, string) {
	ps.stopQuietly()
	return ps.most, ps.when
}

// TestDeploymentCascadingDeletion: deleting a Deployment deletes its
// ReplicaSets and their pods, in the background or in the foreground (then
// before the Deployment itself is gone); --cascade=orphan leaves them,
// without the reference to the deleted owner. No agent runs here: the pods
// stay Pending, which is all this needs.
func TestDeploymentCascadingDeletion(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client()
	ctx := context.Background()
	for _, tc := range []struct {
		name, cascade string
		orphaned      bool
	}{
		{"background", "background", false},
		{"foreground", "foreground", false},
		{"orphan", "orphan", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.MustKubectl("create", "deployment", tc.name, "--image=example", "--replicas=2")
			var r rollout
			eventuallyWithin(t, time.Minute, "a ReplicaSet with two pods", func() (bool, string) {
				var err error
				r, err = getRollout(t, c, "default", tc.name)
				return err == nil && len(r.sets) == 1 && len(live(r.pods)) == 2, fmt.Sprintf("%d ReplicaSets, %d pods, err %v", len(r.sets), len(r.pods), err)
			})
			// kubectl waits until the Deployment is gone.
			s.MustKubectl("delete", "deployment", tc.name, "--cascade="+tc.cascade, "--timeout=50s")
			if _, err := c.AppsV1().Deployments("default").Get(ctx, tc.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("deployment after kubectl delete: got err %v, want NotFound", err)
			}
			if tc.orphaned {
				checkOrphaned(t, c, r)
				return
			}
			if tc.cascade == "foreground" {
				// Foreground: the owner goes last, so its dependents are
				// gone by the time kubectl saw it go.
				if sets, pods := remaining(t, c, r); sets+pods > 0 {
					t.Fatalf("deployment gone in the foreground with %d ReplicaSets and %d pods left", sets, pods)
				}
			}
			eventuallyWithin(t, time.Minute, "ReplicaSet and pods deleted", func() (bool, string) {
				sets, pods := remaining(t, c, r)
				return sets+pods == 0, fmt.Sprintf("%d ReplicaSets, %d pods left", sets, pods)
			})
		})
	}
}

// remaining counts the ReplicaSets and pods of r still there.
func remaining(t *testing.T, c kubernetes.Interface, r rollout) (sets, pods int) {
	t.Helper()
	ctx := context.Background()
	for _, rs := range r.sets {
		if _, err := c.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			sets++
		}
	}
	for _, p := range r.pods {
		if _, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			pods++
		}
	}
	return sets, pods
}

// checkOrphaned checks that r's ReplicaSet outlived its Deployment without
// an ownerReference, and still keeps its pods.
func checkOrphaned(t *testing.T, c kubernetes.Interface, r rollout) {
	t.Helper()
	ctx := context.Background()
	rs, err := c.AppsV1().ReplicaSets(r.sets[0].Namespace).Get(ctx, r.sets[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("orphaned ReplicaSet: %v", err)
	}
	if len(rs.OwnerReferences) != 0 {
		t.Errorf("orphaned ReplicaSet: got ownerReferences %+v, want none", rs.OwnerReferences)
	}
	for _, p := range r.pods {
		got, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil {
			t.Errorf("pod %s of the orphaned ReplicaSet: got err %v, deleting %v; want it kept", p.Name, err, got.GetDeletionTimestamp())
			continue
		}
		if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != rs.UID {
			t.Errorf("pod %s: got controller %+v, want its ReplicaSet still", p.Name, ref)
		}
	}
}
