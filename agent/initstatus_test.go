//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent/container"
)

// initPod has two init containers and one app container.
func initPod(policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: corev1.PodSpec{RestartPolicy: policy,
			InitContainers: []corev1.Container{{Name: "setup"}, {Name: "migrate"}},
			Containers:     []corev1.Container{{Name: "main"}}}}
}

func exitedWith(code int32) *corev1.ContainerStateTerminated {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	return &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}
}

// stateOf is a status's state in one word and its reason, e.g.
// "waiting/PodInitializing".
func stateOf(s corev1.ContainerStatus) string {
	switch {
	case s.State.Running != nil:
		return "running"
	case s.State.Terminated != nil:
		return "terminated/" + s.State.Terminated.Reason
	case s.State.Waiting != nil:
		return "waiting/" + s.State.Waiting.Reason
	}
	return "none"
}

func condition(st *corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

// TestPodStatusInitContainers: the status a pod with init containers
// shows while they run, fail and finish. Regression: the agent reported
// Initialized True and no initContainerStatuses while it never ran them.
func TestPodStatusInitContainers(t *testing.T) {
	running := func(cr *ctrRuntime) { cr.proc = &container.Process{Pid: 1}; cr.started.Store(true) }
	cases := []struct {
		name   string
		policy corev1.RestartPolicy
		set    map[string]func(*ctrRuntime)
		// want
		phase       corev1.PodPhase
		setup       string
		migrate     string
		main        string
		initialized string // the condition's status, then its message
		setupReady  bool
	}{
		{name: "nothing ran yet", policy: corev1.RestartPolicyAlways,
			phase: corev1.PodPending, setup: "waiting/PodInitializing", migrate: "waiting/PodInitializing", main: "waiting/PodInitializing",
			initialized: "False containers with incomplete status: [setup migrate]"},
		{name: "first init container running", policy: corev1.RestartPolicyAlways,
			set:   map[string]func(*ctrRuntime){"setup": running},
			phase: corev1.PodPending, setup: "running", migrate: "waiting/PodInitializing", main: "waiting/PodInitializing",
			initialized: "False containers with incomplete status: [setup migrate]"},
		{name: "second one backs off after a failure", policy: corev1.RestartPolicyOnFailure,
			set: map[string]func(*ctrRuntime){
				"setup": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) },
				"migrate": func(cr *ctrRuntime) {
					cr.st.Exited, cr.st.RestartCount = exitedWith(1), 1
					cr.st.BackOff.Delay, cr.st.BackOffUntil = 20*time.Second, time.Now().Add(10*time.Second)
				}},
			phase: corev1.PodPending, setup: "terminated/Completed", migrate: "waiting/CrashLoopBackOff", main: "waiting/PodInitializing",
			initialized: "False containers with incomplete status: [migrate]", setupReady: true},
		{name: "failed under Never fails the pod", policy: corev1.RestartPolicyNever,
			set:   map[string]func(*ctrRuntime){"setup": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(2) }},
			phase: corev1.PodFailed, setup: "terminated/Error", migrate: "waiting/PodInitializing", main: "waiting/PodInitializing",
			initialized: "False containers with incomplete status: [setup migrate]"},
		{name: "a failure under Always restarts, the pod stays Pending", policy: corev1.RestartPolicyAlways,
			set:   map[string]func(*ctrRuntime){"setup": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(2) }},
			phase: corev1.PodPending, setup: "terminated/Error", migrate: "waiting/PodInitializing", main: "waiting/PodInitializing",
			initialized: "False containers with incomplete status: [setup migrate]"},
		{name: "all done, app running", policy: corev1.RestartPolicyAlways,
			set: map[string]func(*ctrRuntime){
				"setup":   func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) },
				"migrate": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) },
				"main":    running},
			phase: corev1.PodRunning, setup: "terminated/Completed", migrate: "terminated/Completed", main: "running",
			initialized: "True ", setupReady: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := initPod(tc.policy)
			rt := &podRuntime{ctrs: map[string]*ctrRuntime{}, st: podState{Containers: map[string]*ctrState{}}, sandboxUp: true}
			for name, f := range tc.set {
				f(rt.ctr(name))
			}
			st := (&Agent{}).podStatus(pod, rt)
			if st.Phase != tc.phase {
				t.Errorf("phase: got %s, want %s", st.Phase, tc.phase)
			}
			if len(st.InitContainerStatuses) != 2 || len(st.ContainerStatuses) != 1 {
				t.Fatalf("got %d init container and %d container statuses, want 2 and 1", len(st.InitContainerStatuses), len(st.ContainerStatuses))
			}
			for _, c := range []struct {
				s    corev1.ContainerStatus
				want string
			}{{st.InitContainerStatuses[0], tc.setup}, {st.InitContainerStatuses[1], tc.migrate}, {st.ContainerStatuses[0], tc.main}} {
				if got := stateOf(c.s); got != c.want {
					t.Errorf("container %s: got %s, want %s", c.s.Name, got, c.want)
				}
			}
			c := condition(st, corev1.PodInitialized)
			if got := string(c.Status) + " " + c.Message; got != tc.initialized {
				t.Errorf("Initialized: got %q, want %q", got, tc.initialized)
			}
			if c.Status == corev1.ConditionFalse && c.Reason != "ContainersNotInitialized" {
				t.Errorf("Initialized reason: got %q, want ContainersNotInitialized", c.Reason)
			}
			if got := st.InitContainerStatuses[0].Ready; got != tc.setupReady {
				t.Errorf("setup ready: got %v, want %v (a completed init container is ready)", got, tc.setupReady)
			}
			if ready := condition(st, corev1.PodReady); tc.phase != corev1.PodRunning && ready.Status != corev1.ConditionFalse {
				t.Errorf("Ready: got %s while initializing, want False", ready.Status)
			}
		})
	}
}

// TestSyncInitContainersWithoutRunning covers the decisions that start
// nothing: a sidecar holds the sequence until it has started, finished
// init containers are not run again, and a pod whose app container has run
// (an agent restart) is initialized.
func TestSyncInitContainersWithoutRunning(t *testing.T) {
	a := &Agent{}
	newRT := func() *podRuntime {
		return &podRuntime{ctrs: map[string]*ctrRuntime{}, st: podState{Containers: map[string]*ctrState{}}, sandboxUp: true}
	}
	withSidecar := func() *corev1.Pod {
		pod := initPod(corev1.RestartPolicyNever)
		pod.Spec.InitContainers = append([]corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}, pod.Spec.InitContainers...)
		return pod
	}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		set         map[string]func(*ctrRuntime)
		initialized bool
	}{
		{name: "sidecar running, startup probe not passed yet", pod: withSidecar(),
			set: map[string]func(*ctrRuntime){
				"proxy": func(cr *ctrRuntime) { cr.proc = &container.Process{Pid: 1}; cr.cancel = func() {} }},
			initialized: false},
		{name: "sidecar started, the rest done", pod: withSidecar(),
			set: map[string]func(*ctrRuntime){
				"proxy": func(cr *ctrRuntime) {
					cr.proc = &container.Process{Pid: 1}
					cr.cancel = func() {}
					cr.started.Store(true)
				},
				"setup":   func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) },
				"migrate": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) }},
			initialized: true},
		{name: "sidecar crashed after it had started", pod: withSidecar(),
			set: map[string]func(*ctrRuntime){
				"proxy": func(cr *ctrRuntime) {
					cr.st.Ran, cr.st.StartedOnce, cr.st.Exited = true, true, exitedWith(1)
					cr.st.BackOffUntil = time.Now().Add(time.Hour)
				},
				"setup":   func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) },
				"migrate": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) }},
			initialized: true},
		{name: "sidecar crashed before it ever started", pod: withSidecar(),
			set: map[string]func(*ctrRuntime){
				"proxy": func(cr *ctrRuntime) {
					cr.st.Ran, cr.st.Exited = true, exitedWith(1)
					cr.st.BackOffUntil = time.Now().Add(time.Hour)
				}},
			initialized: false},
		{name: "all succeeded", pod: initPod(corev1.RestartPolicyAlways),
			set: map[string]func(*ctrRuntime){
				"setup":   func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) },
				"migrate": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) }},
			initialized: true},
		{name: "app container ran before", pod: initPod(corev1.RestartPolicyNever),
			set: map[string]func(*ctrRuntime){
				"setup": func(cr *ctrRuntime) { cr.st.Exited = exitedWith(0) },
				"main":  func(cr *ctrRuntime) { cr.st.Ran = true }},
			initialized: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRT()
			for name, f := range tc.set {
				f(rt.ctr(name))
			}
			_, done := a.syncInitContainers(context.Background(), nil, tc.pod, rt)
			if done != tc.initialized {
				t.Errorf("initialized: got %v, want %v", done, tc.initialized)
			}
			for _, name := range []string{"setup", "migrate"} {
				if cr := rt.ctr(name); cr.st.Ran {
					t.Errorf("%s ran, want no init container run", name)
				}
			}
		})
	}
}

// TestSidecarStatus: a sidecar is ready by its probes like an app
// container, counts towards the pod's readiness, completes initialization
// once started, and its exits never fail the pod.
func TestSidecarStatus(t *testing.T) {
	pod := initPod(corev1.RestartPolicyNever)
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		ReadinessProbe: &corev1.Probe{}}}
	rt := &podRuntime{ctrs: map[string]*ctrRuntime{}, st: podState{Containers: map[string]*ctrState{}}, sandboxUp: true}
	proxy, main := rt.ctr("proxy"), rt.ctr("main")
	proxy.proc = &container.Process{Pid: 1} // running: never Done
	proxy.started.Store(true)
	main.proc = &container.Process{Pid: 1}
	main.started.Store(true)
	main.st.Ran = true

	st := (&Agent{}).podStatus(pod, rt)
	if s := st.InitContainerStatuses[0]; s.Ready || s.State.Running == nil {
		t.Errorf("sidecar before its readiness probe passed: got %s ready=%v, want running and not ready", stateOf(s), s.Ready)
	}
	if c := condition(st, corev1.ContainersReady); c.Status != corev1.ConditionFalse || c.Message != "containers with unready status: [proxy]" {
		t.Errorf("ContainersReady: got %s %q, want False naming proxy", c.Status, c.Message)
	}
	if c := condition(st, corev1.PodInitialized); c.Status != corev1.ConditionTrue {
		t.Errorf("Initialized with the sidecar started: got %s %q, want True", c.Status, c.Message)
	}
	proxy.ready.Store(true)
	st = (&Agent{}).podStatus(pod, rt)
	if c := condition(st, corev1.PodReady); c.Status != corev1.ConditionTrue || !st.InitContainerStatuses[0].Ready {
		t.Errorf("sidecar ready: got pod Ready %s, sidecar ready %v; want both", c.Status, st.InitContainerStatuses[0].Ready)
	}
	proxy.proc, proxy.st.Exited = nil, exitedWith(1)
	st = (&Agent{}).podStatus(pod, rt)
	if st.Phase != corev1.PodRunning {
		t.Errorf("sidecar exited with 1 under restartPolicy Never: got phase %s, want Running (sidecars always restart)", st.Phase)
	}
	if c := condition(st, corev1.PodInitialized); c.Status != corev1.ConditionTrue {
		t.Errorf("Initialized after the app container ran: got %s, want True for good", c.Status)
	}
}

func TestInitFailed(t *testing.T) {
	st := func(s corev1.ContainerState) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: "a", State: s}}
	}
	failed := corev1.ContainerState{Terminated: exitedWith(1)}
	regular := []corev1.Container{{Name: "a"}}
	sidecar := []corev1.Container{{Name: "a", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	for _, tc := range []struct {
		name     string
		policy   corev1.RestartPolicy
		spec     []corev1.Container
		statuses []corev1.ContainerStatus
		want     bool
	}{
		{"failed, Never", corev1.RestartPolicyNever, regular, st(failed), true},
		{"failed, OnFailure restarts it", corev1.RestartPolicyOnFailure, regular, st(failed), false},
		{"failed, Always restarts it", corev1.RestartPolicyAlways, regular, st(failed), false},
		{"succeeded, Never", corev1.RestartPolicyNever, regular, st(corev1.ContainerState{Terminated: exitedWith(0)}), false},
		{"running, Never", corev1.RestartPolicyNever, regular, st(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}), false},
		{"sidecar failed, Never restarts it", corev1.RestartPolicyNever, sidecar, st(failed), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := initFailed(tc.policy, tc.spec, tc.statuses); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInitRestartPolicy(t *testing.T) {
	for pod, want := range map[corev1.RestartPolicy]corev1.RestartPolicy{
		corev1.RestartPolicyAlways:    corev1.RestartPolicyOnFailure,
		corev1.RestartPolicyOnFailure: corev1.RestartPolicyOnFailure,
		corev1.RestartPolicyNever:     corev1.RestartPolicyNever,
	} {
		if got := initRestartPolicy(pod); got != want {
			t.Errorf("pod %s: got %s, want %s", pod, got, want)
		}
	}
}

// TestInitContainerWithoutCommand: an init container gets the app
// containers' clear reason for a missing command, and holds the pod.
func TestInitContainerWithoutCommand(t *testing.T) {
	a := &Agent{}
	pod := initPod(corev1.RestartPolicyAlways)
	rt := &podRuntime{ctrs: map[string]*ctrRuntime{}, st: podState{Containers: map[string]*ctrState{}}, sandboxUp: true}
	if _, done := a.syncInitContainers(context.Background(), nil, pod, rt); done {
		t.Fatal("got initialized, want the pod held at setup")
	}
	st := a.podStatus(pod, rt)
	if got := stateOf(st.InitContainerStatuses[0]); got != "waiting/NoCommand" {
		t.Errorf("setup: got %s, want waiting/NoCommand", got)
	}
	if got := stateOf(st.InitContainerStatuses[1]); got != "waiting/PodInitializing" || rt.ctr("migrate").st.Ran {
		t.Errorf("migrate: got %s (ran %v), want waiting/PodInitializing and not run", got, rt.ctr("migrate").st.Ran)
	}
	if st.Phase != corev1.PodPending {
		t.Errorf("phase: got %s, want Pending", st.Phase)
	}
}

// An init container that ended while no agent ran is judged by its exit
// file when the next agent loads the pod: success is success, not the
// "status unknown" of other containers, which would run it again (or fail
// the pod under restartPolicy Never).
func TestLoadStatesReadsExitFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pods", "u")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exitFile := filepath.Join(dir, "exit-setup")
	os.WriteFile(exitFile, []byte("0\n"), 0o644)
	gone := 1 << 30 // above pid_max: no such process
	st := podState{UID: "u", Namespace: "ns", Name: "p", HostNetwork: true, Containers: map[string]*ctrState{
		"setup": {Pid: gone, Start: 1, ID: "setup-0", Ran: true, ExitFile: exitFile},
		"main":  {Pid: gone, Start: 1, ID: "main-0", Ran: true},
	}}
	data, _ := json.Marshal(st)
	os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644)

	rt := (&Agent{opts: Options{RootDir: root}, runtime: processRuntime{}}).loadStates(context.Background())["u"]
	if rt == nil {
		t.Fatal("pod not loaded")
	}
	if e := rt.st.Containers["setup"].Exited; e == nil || e.ExitCode != 0 || e.Reason != "Completed" {
		t.Errorf("init container with exit file 0: got %+v, want Completed with 0", e)
	}
	if e := rt.st.Containers["main"].Exited; e == nil || e.Reason != "ContainerStatusUnknown" {
		t.Errorf("container without exit file: got %+v, want ContainerStatusUnknown", e)
	}
}
