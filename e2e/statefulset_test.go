package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/e2e/framework"
)

// statefulSetManifest is the seeds' headless-Service example: a
// StatefulSet web of 3 pods serving HTTP, governed by the headless
// Service nginx.
const statefulSetManifest = `
apiVersion: v1
kind: Service
metadata:
  name: nginx
spec:
  clusterIP: None
  selector:
    app: nginx
  ports:
  - name: web
    port: 80
    targetPort: 8080
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: nginx
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: web
        image: python
        command: ["python3", "-m", "http.server", "8080"]
        env:
        - name: VERSION
          value: "1"
`

// podLog records, in the order a watch sees them, what happens to the
// set's pods from the moment it starts: "add web-0", "ready web-0",
// "delete web-0" (readiness once per pod).
type podLog struct {
	mu      sync.Mutex
	entries []string
}

func watchPods(t *testing.T, c kubernetes.Interface) *podLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// From the list's resourceVersion: only what happens from now on,
	// not the pods there already.
	list, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=nginx",
		ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	l := &podLog{}
	ready := map[types.UID]bool{}
	for _, p := range list.Items {
		ready[p.UID] = podReady(&p)
	}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			switch {
			case ev.Type == watch.Added:
				l.add("add " + pod.Name)
			case ev.Type == watch.Deleted:
				l.add("delete " + pod.Name)
			}
			if ev.Type != watch.Deleted && podReady(pod) && !ready[pod.UID] {
				ready[pod.UID] = true
				l.add("ready " + pod.Name)
			}
		}
	}()
	return l
}

func (l *podLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
}

// get returns the entries that start with one of prefixes, or all of
// them when none is given.
func (l *podLog) get(prefixes ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(prefixes) == 0 {
		return slices.Clone(l.entries)
	}
	var out []string
	for _, e := range l.entries {
		for _, p := range prefixes {
			if strings.HasPrefix(e, p) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// TestStatefulSet: the StatefulSet scenario through the binary,
// kubectl and dig. web-0.nginx resolves to pod web-0's IP; a deleted
// web-1 comes back under its name; a rolling update replaces pods from
// the highest ordinal down and stops at the partition; kubectl rollout
// undo brings the first revision back; scaling to 1 removes web-2 before
// web-1.
func TestStatefulSet(t *testing.T) {
	s, node := startDNSNode(t, "--disable", "proxy,ingress", "--node-monitor-grace-period", "1h")
	c := s.Client()
	ctx := context.Background()

	created := watchPods(t, c)
	s.MustKubectlStdin(statefulSetManifest, "apply", "-f", "-")
	if out := s.MustKubectl("rollout", "status", "statefulset/web", "--timeout=60s"); !strings.Contains(out, "roll out complete") {
		t.Errorf("kubectl rollout status: got %q, want the roll out complete", out)
	}
	waitReadyReplicas(t, s, "3")
	// OrderedReady: each pod is created only once the one below is ready.
	wantOrder := []string{"add web-0", "ready web-0", "add web-1", "ready web-1", "add web-2", "ready web-2"}
	if got := created.get("add", "ready"); !slices.Equal(got, wantOrder) {
		t.Errorf("creation: got %q, want %q", got, wantOrder)
	}
	eventually(t, "kubectl shows the set's events as upstream words them", func() (bool, string) {
		out, _ := s.Kubectl("get", "events", "--field-selector", "involvedObject.kind=StatefulSet,involvedObject.name=web",
			"-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
		return strings.Contains(out, "SuccessfulCreate: create Pod web-0 in StatefulSet web successful") &&
			strings.Contains(out, "SuccessfulCreate: create Pod web-2 in StatefulSet web successful"), out
	})
	pods := podsByName(t, c)

	dig := func(name string) string { return digShort(t, node, dnsNodeIP, "53", name) }
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		p := pods[name]
		if p.Spec.Hostname != name || p.Spec.Subdomain != "nginx" {
			t.Errorf("%s: got hostname %q subdomain %q, want %q and nginx", name, p.Spec.Hostname, p.Spec.Subdomain, name)
		}
	}
	eventually(t, "web-0.nginx resolves to web-0's IP", func() (bool, string) {
		got := dig("web-0.nginx.default.svc.cluster.local")
		return got == pods["web-0"].Status.PodIP, "got " + got + ", want " + pods["web-0"].Status.PodIP
	})

	// A deleted pod comes back under the same name.
	s.MustKubectl("delete", "pod", "web-1")
	eventuallyWithin(t, time.Minute, "a new web-1", func() (bool, string) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.UID != pods["web-1"].UID && podReady(p), "web-1 " + string(p.UID) + " " + string(p.Status.Phase)
	})
	waitReadyReplicas(t, s, "3")

	revs := rollingUpdate(t, s, c)
	rollBack(t, s, revs)

	// Scale-down removes the highest ordinal first.
	deleted := watchPods(t, c)
	s.MustKubectl("scale", "statefulset", "web", "--replicas=1")
	waitReadyReplicas(t, s, "1")
	eventuallyWithin(t, time.Minute, "web-2 and web-1 removed in that order", func() (bool, string) {
		got := deleted.get("delete")
		return slices.Equal(got, []string{"delete web-2", "delete web-1"}), strings.Join(got, ", ")
	})
}

// rollingUpdate changes web's template with partition 1: web-2 then web-1
// are replaced, web-0 stays at the current revision. It returns the
// current and update revisions.
func rollingUpdate(t *testing.T, s *framework.Server, c kubernetes.Interface) []string {
	t.Helper()
	events := watchPods(t, c)
	s.MustKubectl("patch", "statefulset", "web", "-p",
		`{"spec":{"updateStrategy":{"rollingUpdate":{"partition":1}},"template":{"spec":{"containers":[{"name":"web","env":[{"name":"VERSION","value":"2"}]}]}}}}`)
	waitStatus(t, s, "{.status.updatedReplicas} {.status.readyReplicas}", "2 3")
	// Highest ordinal first, the next only once the replaced pod is ready.
	wantOrder := []string{"delete web-2", "add web-2", "ready web-2", "delete web-1", "add web-1", "ready web-1"}
	if got := events.get(); !slices.Equal(got, wantOrder) {
		t.Errorf("rolling update: got %q, want %q", got, wantOrder)
	}
	if out := s.MustKubectl("rollout", "status", "statefulset/web", "--timeout=60s"); !strings.Contains(out, "partitioned roll out complete: 2 new pods have been updated") {
		t.Errorf("kubectl rollout status: got %q, want a partitioned roll out complete with 2 new pods", out)
	}
	revs := strings.Fields(s.MustKubectl("get", "statefulset", "web", "-o", "jsonpath={.status.currentRevision} {.status.updateRevision}"))
	if len(revs) != 2 || revs[0] == revs[1] {
		t.Fatalf("got revisions %q, want current and update differing at the partition", revs)
	}
	pods := podsByName(t, c)
	for name, want := range map[string]string{"web-0": revs[0], "web-1": revs[1], "web-2": revs[1]} {
		if got := pods[name].Labels["controller-revision-hash"]; got != want {
			t.Errorf("%s: got revision %q, want %q", name, got, want)
		}
	}
	return revs
}

// rollBack undoes the update with kubectl, which reads the set's
// ControllerRevisions: the first revision comes back as the newest, and
// every pod runs it.
func rollBack(t *testing.T, s *framework.Server, revs []string) {
	t.Helper()
	if got := historyRevisions(s); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("kubectl rollout history: got revisions %q, want 1 and 2", got)
	}
	s.MustKubectl("rollout", "undo", "statefulset/web")
	waitStatus(t, s, "{.status.updateRevision} {.status.currentRevision} {.status.updatedReplicas} {.status.readyReplicas}",
		revs[0]+" "+revs[0]+" 3 3")
	if got := historyRevisions(s); !slices.Equal(got, []string{"2", "3"}) {
		t.Errorf("kubectl rollout history after undo: got revisions %q, want 2 and 3", got)
	}
}

func waitReadyReplicas(t *testing.T, s *framework.Server, want string) {
	t.Helper()
	waitStatus(t, s, "{.status.readyReplicas}/{.status.replicas}", want+"/"+want)
}

// waitStatus waits for web's status, printed with jsonpath, to read want.
// Pods start as processes on a loaded machine: a minute, not seconds.
func waitStatus(t *testing.T, s *framework.Server, jsonpath, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _ := s.Kubectl("get", "statefulset", "web", "-o", "jsonpath="+jsonpath)
		if out == want {
			return
		}
		if time.Now().After(deadline) {
			pods, _ := s.Kubectl("get", "pods", "-o", "wide", "-L", "controller-revision-hash")
			t.Fatalf("statefulset web: got %s = %q, want %q\n%s", jsonpath, out, want, pods)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// historyRevisions returns the revision numbers `kubectl rollout history`
// lists for web.
func historyRevisions(s *framework.Server) []string {
	var revs []string
	for _, line := range strings.Split(s.MustKubectl("rollout", "history", "statefulset/web"), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] != "REVISION" && !strings.Contains(f[0], "/") {
			revs = append(revs, f[0])
		}
	}
	return revs
}

func podsByName(t *testing.T, c kubernetes.Interface) map[string]*corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=nginx"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}
