//go:build linux

package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/envvars"
	"portal.dev/portal/agent/probe"
	"portal.dev/portal/agent/resolvconf"
)

// podWorker serializes everything done to one pod, as kubelet's pod
// workers: informer events and process exits only wake it.
type podWorker struct {
	uid  types.UID
	wake chan struct{}

	mu      sync.Mutex
	pod     *corev1.Pod
	deleted bool
	rt      *podRuntime
}

func (w *podWorker) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *podWorker) get() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.deleted
}

func (a *Agent) podEvent(ctx context.Context, obj any) {
	deleted := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if !deleted {
		// A delete event carries the last state; the lister no longer has it.
		if _, err := a.pods.Pods(pod.Namespace).Get(pod.Name); apierrors.IsNotFound(err) {
			deleted = true
		}
	}
	a.mu.Lock()
	w, ok := a.workers[pod.UID]
	if !ok && deleted {
		a.mu.Unlock()
		return
	}
	if !ok {
		w = &podWorker{uid: pod.UID, wake: make(chan struct{}, 1), rt: a.adopted[pod.UID]}
		delete(a.adopted, pod.UID)
		a.workers[pod.UID] = w
		a.wg.Add(1)
		go a.runWorker(ctx, w)
	}
	a.mu.Unlock()
	w.mu.Lock()
	w.pod, w.deleted = pod, deleted
	w.mu.Unlock()
	w.kick()
}

// startWorker runs a worker for a runtime without a pod: it stops it.
func (a *Agent) startWorker(ctx context.Context, uid types.UID, rt *podRuntime) {
	a.mu.Lock()
	w := &podWorker{uid: uid, wake: make(chan struct{}, 1), rt: rt, deleted: true}
	delete(a.adopted, uid)
	a.workers[uid] = w
	a.wg.Add(1)
	a.mu.Unlock()
	go a.runWorker(ctx, w)
	w.kick()
}

func (a *Agent) runWorker(ctx context.Context, w *podWorker) {
	defer a.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
		next, done := a.syncPod(ctx, w)
		if done {
			a.mu.Lock()
			if a.workers[w.uid] == w {
				delete(a.workers, w.uid)
			}
			a.mu.Unlock()
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if next <= 0 {
			next = time.Hour
		}
		timer.Reset(next)
	}
}

// syncPod brings the pod's processes to what its spec and deletion state
// ask and writes its status. It returns when to look again, and done when
// the pod is gone and cleaned up.
func (a *Agent) syncPod(ctx context.Context, w *podWorker) (time.Duration, bool) {
	pod, deleted := w.get()
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "uid", w.uid)
	ctx = klog.NewContext(ctx, logger)
	rt := w.rt
	if deleted || pod == nil {
		if rt != nil && !rt.cleaned {
			if a.killPod(ctx, rt, nil, time.Duration(rt.st.Grace)*time.Second) {
				a.cleanup(ctx, rt)
			}
		}
		return 0, true
	}
	if rt == nil {
		rt = a.newRuntime(pod)
		w.rt = rt
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			// Finished before this agent started (its state is gone with
			// its sandbox): never run it again.
			rt.cleaned = true
		}
	}
	rt.st.Grace = gracePeriod(pod)
	if pod.DeletionTimestamp != nil {
		return a.syncTerminating(ctx, w, pod, rt)
	}
	if rt.cleaned {
		// Finished pod, torn down: nothing runs any more.
		return 0, false
	}
	if !rt.sandboxUp {
		if err := a.startSandbox(ctx, pod, rt); err != nil {
			logger.Error(err, "Create pod sandbox")
			a.writeStatus(ctx, pod, rt) // retried with the sandbox
			return 2 * time.Second, false
		}
	}
	next, initialized := a.syncInitContainers(ctx, w, pod, rt)
	// App containers start once every init container has succeeded.
	for i := 0; initialized && i < len(pod.Spec.Containers); i++ {
		if d := a.syncContainer(ctx, w, pod, rt, &pod.Spec.Containers[i], pod.Spec.RestartPolicy); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	if err := rt.save(); err != nil {
		logger.Error(err, "Save pod state")
	}
	st, written := a.writeStatus(ctx, pod, rt)
	if !written && (next == 0 || next > statusRetry) {
		next = statusRetry
	}
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		// kubelet tears a finished pod's sandbox down and keeps its status.
		// Only sidecars may still run: they get the grace period, and
		// their ends are written.
		running := false
		for _, cr := range rt.ctrs {
			running = running || cr.proc != nil
		}
		if !a.killPod(ctx, rt, pod, time.Duration(rt.st.Grace)*time.Second) {
			return 0, false
		}
		a.cleanup(ctx, rt)
		if running {
			a.writeStatus(ctx, pod, rt)
		}
	}
	return next, false
}

// syncTerminating stops a pod that is being deleted, then deletes it for
// good (kubelet's final delete with grace 0).
//
// While its containers stop, the pod stays Ready as long as they run and
// their readiness probes pass, as with kubelet: the EndpointSlice
// controller then publishes it as serving and terminating, so proxies
// take it out of rotation but can still fall back to it when no other
// endpoint is ready. Each probe result on the way is written at once, and
// a container that exits is at once not ready (its state turns terminated
// once every container has stopped).
func (a *Agent) syncTerminating(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime) (time.Duration, bool) {
	logger := klog.FromContext(ctx)
	if !rt.cleaned {
		rt.terminating = true
		grace := time.Duration(rt.st.Grace) * time.Second
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		logger.Info("Stopping pod", "gracePeriod", grace)
		// The status written meanwhile looks containers up with rt.ctr,
		// which adds missing ones to rt.ctrs: add them all now, before
		// stopContainers reads the map from its own goroutine.
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				rt.ctr(c.Name)
			}
		}
		stopped := make(chan struct{})
		go func() { a.stopContainers(ctx, rt, pod, grace); close(stopped) }()
		a.writeStatus(ctx, pod, rt)
		for waiting := true; waiting; {
			select {
			case <-stopped:
				waiting = false
			case <-w.wake:
				a.writeStatus(ctx, pod, rt)
			}
		}
		if ctx.Err() != nil {
			// The agent is stopping: the pod goes on terminating under
			// the next agent, which adopts it.
			return 0, false
		}
		a.recordExits(rt, pod)
		a.cleanup(ctx, rt)
		a.writeStatus(ctx, pod, rt)
	}
	if rt.deleteSent {
		return 5 * time.Second, false
	}
	err := a.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		logger.Error(err, "Delete stopped pod")
		return time.Second, false
	}
	rt.deleteSent = true
	return 5 * time.Second, false
}

func gracePeriod(pod *corev1.Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// startSandbox creates the pod's namespaces, network and files.
func (a *Agent) startSandbox(ctx context.Context, pod *corev1.Pod, rt *podRuntime) error {
	etc := filepath.Join(rt.dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	hostname, _ := resolvconf.Hostname(pod, a.opts.ClusterDomain)
	if rt.st.StartTime.IsZero() {
		rt.st.StartTime = time.Now().Truncate(time.Second)
	}
	if pod.Spec.HostNetwork {
		rt.st.IPs = a.hostIPs()
		hostname, _ = os.Hostname()
	} else {
		if rt.sandbox != nil {
			rt.sandbox.Signal(syscall.SIGKILL)
		}
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		sb, err := a.runtime.Start(container.Spec{Init: a.opts.InitPath, Pause: true, Hostname: hostname,
			NewNamespaces: syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
			Stdout:        devnull, Stderr: devnull})
		devnull.Close()
		if err != nil {
			return fmt.Errorf("start sandbox: %w", err)
		}
		rt.sandbox = sb
		rt.st.SandboxPid, rt.st.SandboxStart = sb.ID()
		if err := rt.save(); err != nil {
			return err
		}
		ips, err := a.net.Attach(ctx, string(pod.UID), rt.st.SandboxPid)
		if err != nil {
			sb.Signal(syscall.SIGKILL)
			return err
		}
		rt.st.IPs = nil
		for _, ip := range ips {
			rt.st.IPs = append(rt.st.IPs, ip.String())
		}
	}
	var dns []string
	for _, ip := range a.opts.ClusterDNS {
		dns = append(dns, ip.String())
	}
	files := map[string][]byte{
		"resolv.conf": resolvconf.ForPod(pod, resolvconf.Config{ClusterDomain: a.opts.ClusterDomain, ClusterDNS: dns, Node: a.dnsNode}).Bytes(),
		"hosts":       resolvconf.Hosts(pod, rt.st.IPs, a.opts.ClusterDomain, []byte(readFile("/etc/hosts"))),
		"hostname":    []byte(hostname + "\n"),
	}
	rt.st.Mounts = nil
	for name, data := range files {
		p := filepath.Join(etc, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		if _, err := os.Stat("/etc/" + name); err == nil {
			rt.st.Mounts = append(rt.st.Mounts, container.Mount{Source: p, Target: "/etc/" + name})
		}
	}
	rt.sandboxUp = true
	klog.FromContext(ctx).V(2).Info("Pod sandbox ready", "ips", rt.st.IPs)
	return rt.save()
}

func (rt *podRuntime) namespaces() container.Namespaces {
	if rt.st.HostNetwork || rt.sandbox == nil {
		return container.Namespaces{}
	}
	pid, _ := rt.sandbox.ID()
	return container.Of(pid)
}

// syncContainer notices a container's exit, restarts it when policy and
// back-off allow, and starts it the first time. It returns when to look
// again (a back-off ending), or 0.
func (a *Agent) syncContainer(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime, c *corev1.Container, policy corev1.RestartPolicy) time.Duration {
	cr := rt.ctr(c.Name)
	now := time.Now()
	if cr.proc != nil {
		select {
		case <-cr.proc.Done():
			a.recordExit(rt, pod, cr, now)
		default:
			if cr.cancel == nil {
				// Adopted from an earlier agent: probe it again, from
				// the results it had, and notice its exit.
				a.startProbes(ctx, w, pod, rt, c, cr)
				go func(proc Process) { <-proc.Done(); w.kick() }(cr.proc)
			}
			if why, _ := cr.liveFailed.Load().(string); why != "" && !cr.killing {
				klog.FromContext(ctx).Info("Restarting container", "container", c.Name, "reason", why)
				a.event(pod, corev1.EventTypeNormal, "Killing", "%s", why)
				cr.killing = true
				go a.stopContainer(ctx, rt, pod, c, cr, time.Duration(rt.st.Grace)*time.Second)
			}
			return 0
		}
	}
	st := cr.st
	if st.Exited != nil {
		if !restarts(policy, st.Exited.ExitCode) {
			return 0
		}
		if wait := st.BackOffUntil.Sub(now); wait > 0 {
			a.event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.Name, pod.Name)
			return wait
		}
		st.Last, st.Exited = st.Exited, nil
		st.RestartCount++
	} else if st.Ran {
		return 0
	}
	a.startContainer(ctx, w, pod, rt, c, cr)
	if cr.st.Exited != nil {
		return max(cr.st.BackOffUntil.Sub(now), time.Millisecond)
	}
	if cr.waitReason != "" {
		return 5 * time.Second // a missing ConfigMap may appear
	}
	return 0
}

func (a *Agent) recordExit(rt *podRuntime, pod *corev1.Pod, cr *ctrRuntime, now time.Time) {
	code, known := cr.proc.ExitCode()
	st := cr.st
	if known {
		st.Exited = exitState(st, code, now)
	} else {
		st.Exited = lostExit(st, now)
	}
	if why, _ := cr.liveFailed.Load().(string); why != "" {
		st.Exited.Message = why
	}
	st.Pid, st.Start = 0, 0
	cr.proc, cr.killing = nil, false
	cr.liveFailed.Store("")
	if cr.cancel != nil {
		cr.cancel()
		cr.cancel = nil
	}
	cr.ready.Store(false)
	delay := st.BackOff.next(now.Sub(st.StartedAt))
	st.BackOffUntil = now.Add(delay)
}

// startContainer starts c's next run, or records why it cannot.
func (a *Agent) startContainer(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime, c *corev1.Container, cr *ctrRuntime) {
	logger := klog.FromContext(ctx).WithValues("container", c.Name)
	waiting := cr.waitReason
	defer func() {
		// Once per reason, not on every retry.
		if cr.waitReason != "" && cr.waitReason != waiting {
			a.event(pod, corev1.EventTypeWarning, "Failed", "Error: %s", cr.waitMessage)
		}
	}()
	cr.waitReason, cr.waitMessage = "", ""
	if len(c.Command) == 0 {
		cr.waitReason = "NoCommand"
		cr.waitMessage = "Portal runs processes, not images: the container needs a command (the image is not pulled)"
		return
	}
	env, err := a.containerEnv(pod, rt, c)
	if err != nil {
		cr.waitReason, cr.waitMessage = "CreateContainerConfigError", err.Error()
		return
	}
	argv := envvars.ExpandArgs(append(append([]string{}, c.Command...), c.Args...), env)
	cr.env = processEnv(env, rt, pod)
	st := cr.st
	now := time.Now().Truncate(time.Second)
	st.Ran = true
	st.ID = ctrID(pod.UID, c.Name, st.RestartCount)
	st.StartedAt = now
	path, err := container.LookPath(argv[0], lookupEnv(cr.env, "PATH"), c.WorkingDir)
	var proc Process
	if err == nil {
		proc, err = a.spawn(rt, pod, c, cr, path, argv)
	}
	if err != nil {
		logger.Info("Container failed to start", "err", err)
		a.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		st.Exited = &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: err.Error(),
			StartedAt: metaTime(now), FinishedAt: metaTime(now), ContainerID: st.ID}
		st.BackOffUntil = now.Add(st.BackOff.next(0))
		return
	}
	cr.proc = proc
	st.Pid, st.Start = proc.ID()
	cr.started.Store(c.StartupProbe == nil)
	cr.ready.Store(false)
	logger.V(2).Info("Started container", "pid", st.Pid, "restartCount", st.RestartCount)
	a.event(pod, corev1.EventTypeNormal, "Created", "Created container %s", c.Name)
	a.event(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	a.startProbes(ctx, w, pod, rt, c, cr)
	go func() { <-proc.Done(); w.kick() }()
}

// spawn starts the process with its log file.
func (a *Agent) spawn(rt *podRuntime, pod *corev1.Pod, c *corev1.Container, cr *ctrRuntime, path string, argv []string) (Process, error) {
	logDir := filepath.Join(rt.dir, "logs", c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	n := cr.st.RestartCount
	os.Remove(filepath.Join(logDir, fmt.Sprintf("%d.log", n-2)))
	log, err := os.OpenFile(filepath.Join(logDir, fmt.Sprintf("%d.log", n)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	spec := container.Spec{Path: path, Args: argv, Env: cr.env, Dir: c.WorkingDir, Stdout: log, Stderr: log,
		Namespaces: rt.namespaces(), Mounts: rt.st.Mounts, Init: a.opts.InitPath}
	if spec.ExitFile, err = rt.exitFile(pod, c); err != nil {
		return nil, err
	}
	cr.st.ExitFile = spec.ExitFile
	if sc := c.SecurityContext; sc != nil {
		spec.UID, spec.GID = sc.RunAsUser, sc.RunAsGroup
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if spec.UID == nil {
			spec.UID = psc.RunAsUser
		}
		if spec.GID == nil {
			spec.GID = psc.RunAsGroup
		}
	}
	return a.runtime.Start(spec)
}

// containerEnv is the container's environment as kubelet makes it.
func (a *Agent) containerEnv(pod *corev1.Pod, rt *podRuntime, c *corev1.Container) ([]envvars.Var, error) {
	services, err := a.services.List(everything)
	if err != nil {
		return nil, err
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	svcEnv := envvars.ServiceMap(services, pod.Namespace, links)
	vars, invalid, err := envvars.Container(envvars.Pod{Pod: pod, PodIPs: rt.st.IPs, HostIPs: a.hostIPs(),
		Allocatable: a.allocatable()}, c, svcEnv, apiSources{a})
	if len(invalid) > 0 {
		klog.Background().Info("Skipped invalid environment variable names", "pod", klog.KObj(pod), "container", c.Name, "names", invalid)
	}
	return vars, err
}

// processEnv is the container's environment plus what a container runtime
// adds when the image does not say: PATH (the agent's, as there is no
// image), HOSTNAME and HOME.
func processEnv(vars []envvars.Var, rt *podRuntime, pod *corev1.Pod) []string {
	out := make([]string, 0, len(vars)+3)
	has := map[string]bool{}
	for _, v := range vars {
		out = append(out, v.Name+"="+v.Value)
		has[v.Name] = true
	}
	if !has["PATH"] {
		path := os.Getenv("PATH")
		if path == "" {
			path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		}
		out = append(out, "PATH="+path)
	}
	if !has["HOSTNAME"] {
		h, _ := resolvconf.Hostname(pod, "")
		if rt.st.HostNetwork {
			h, _ = os.Hostname()
		}
		out = append(out, "HOSTNAME="+h)
	}
	if !has["HOME"] {
		out = append(out, "HOME=/root")
	}
	return out
}

func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

type apiSources struct{ a *Agent }

func (s apiSources) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	return s.a.client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (s apiSources) Secret(ns, name string) (*corev1.Secret, error) {
	return s.a.client.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (a *Agent) allocatable() corev1.ResourceList {
	return a.nodeStatus(nil, time.Now()).Allocatable
}

// startProbes starts c's probe workers for its current run.
func (a *Agent) startProbes(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime, c *corev1.Container, cr *ctrRuntime) {
	pctx, cancel := context.WithCancel(ctx)
	cr.cancel = cancel
	host := ""
	if len(rt.st.IPs) > 0 {
		host = rt.st.IPs[0]
	}
	env, ns, mounts, proc := cr.env, rt.namespaces(), rt.st.Mounts, cr.proc
	target := probe.Target{Host: host, Ports: c.Ports, Exec: func(ctx context.Context, cmd []string) (int, []byte, error) {
		return a.execIn(ctx, proc, env, ns, mounts, cmd)
	}}
	startedAt := cr.st.StartedAt
	started := func() bool { return cr.started.Load() }
	logger := klog.FromContext(ctx).WithValues("container", c.Name)
	from := probe.Unknown
	if cr.ready.Load() {
		from = probe.Success
	}
	run := func(k probe.Kind, p *corev1.Probe, gate func() bool, on func(probe.Result, string)) {
		wk := &probe.Worker{Kind: k, Probe: p, Target: target, StartedAt: startedAt, Gate: gate, OnResult: func(r probe.Result, msg string) {
			logger.V(2).Info("Probe result changed", "probe", k, "result", r, "message", msg)
			switch {
			case r == probe.Failure:
				a.event(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", k, msg)
			case r == probe.Success && msg != "":
				a.event(pod, corev1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", k, msg)
			}
			on(r, msg)
			w.kick()
		}}
		if k == probe.Readiness {
			wk.From = from
		}
		go wk.Run(pctx)
	}
	if p := c.StartupProbe; p != nil && !cr.started.Load() {
		run(probe.Startup, p, nil, func(r probe.Result, msg string) {
			switch r {
			case probe.Success:
				cr.started.Store(true)
			case probe.Failure:
				cr.liveFailed.Store(fmt.Sprintf("Container %s failed startup probe, will be restarted: %s", c.Name, msg))
			}
		})
	}
	if p := c.ReadinessProbe; p != nil {
		run(probe.Readiness, p, started, func(r probe.Result, _ string) { cr.ready.Store(r == probe.Success) })
	}
	if p := c.LivenessProbe; p != nil {
		run(probe.Liveness, p, started, func(r probe.Result, msg string) {
			if r == probe.Failure {
				cr.liveFailed.Store(fmt.Sprintf("Container %s failed liveness probe, will be restarted: %s", c.Name, msg))
			}
		})
	}
}

// execIn runs cmd inside a pod's namespaces with the container's
// environment (exec probes and hooks). With the container's process running
// and nsenter on the node, cmd joins that process's namespaces, mounts
// included, as `kubectl exec` would: nsenter costs about a millisecond.
// Otherwise it goes through the init helper, which costs a start of this
// whole binary (~50 ms of CPU), once per probe period per pod.
func (a *Agent) execIn(ctx context.Context, proc Process, env []string, ns container.Namespaces, mounts []container.Mount, cmd []string) (int, []byte, error) {
	if len(cmd) == 0 {
		return 0, nil, fmt.Errorf("empty command")
	}
	path, err := container.LookPath(cmd[0], lookupEnv(env, "PATH"), "")
	if err != nil {
		return 0, nil, err
	}
	if nsenter := nsenterPath(); nsenter != "" && running(proc) {
		pid, _ := proc.ID()
		args := append([]string{"nsenter", "--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--net", "--", path}, cmd[1:]...)
		return a.runtime.Run(ctx, container.Spec{Path: nsenter, Args: args, Env: env}, nil)
	}
	return a.runtime.Run(ctx, container.Spec{Path: path, Args: cmd, Env: env, Namespaces: ns, Mounts: mounts, Init: a.opts.InitPath}, nil)
}

// running reports whether proc has not been seen to exit. nsenter must not
// target the PID of a container that is gone: the PID may belong to
// another process by now.
func running(proc Process) bool {
	if proc == nil {
		return false
	}
	if pid, _ := proc.ID(); pid <= 0 {
		return false
	}
	select {
	case <-proc.Done():
		return false
	default:
		return true
	}
}

// nsenterPath is util-linux's nsenter, or "" when the node has none.
var nsenterPath = sync.OnceValue(func() string {
	p, _ := exec.LookPath("nsenter")
	return p
})

// minStopGrace is the least time between SIGTERM and SIGKILL when a grace
// period was given, however much of it the preStop hook used (kubelet's
// minimum too): a process always gets a moment to shut down cleanly.
const minStopGrace = 2 * time.Second

// stopContainer runs c's preStop hook, sends SIGTERM, and SIGKILL once
// grace has passed (but never sooner than minStopGrace after SIGTERM, unless
// grace is zero), then waits until the process group is gone. When ctx
// ends first (the agent stops), it leaves the process alone.
func (a *Agent) stopContainer(ctx context.Context, rt *podRuntime, pod *corev1.Pod, c *corev1.Container, cr *ctrRuntime, grace time.Duration) {
	proc := cr.proc
	if proc == nil {
		return
	}
	deadline := time.Now().Add(grace)
	if c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		hctx, cancel := context.WithDeadline(ctx, deadline)
		a.runHook(hctx, rt, c, cr, c.Lifecycle.PreStop)
		cancel()
	}
	if ctx.Err() != nil {
		return
	}
	proc.Signal(syscall.SIGTERM)
	if grace > 0 {
		deadline = later(deadline, time.Now().Add(minStopGrace))
	}
	kill := time.NewTimer(time.Until(deadline))
	defer kill.Stop()
	select {
	case <-proc.Done():
	case <-kill.C:
	case <-ctx.Done():
		return
	}
	proc.Signal(syscall.SIGKILL)
	<-proc.Done()
	for i := 0; i < 100 && !proc.GroupGone(); i++ {
		proc.Signal(syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
}

func (a *Agent) runHook(ctx context.Context, rt *podRuntime, c *corev1.Container, cr *ctrRuntime, h *corev1.LifecycleHandler) {
	logger := klog.FromContext(ctx).WithValues("container", c.Name)
	switch {
	case h.Exec != nil:
		code, out, err := a.execIn(ctx, cr.proc, cr.env, rt.namespaces(), rt.st.Mounts, h.Exec.Command)
		if err != nil || code != 0 {
			logger.Info("PreStop hook failed", "exitCode", code, "err", err, "output", string(out))
		}
	case h.HTTPGet != nil || h.TCPSocket != nil:
		host := ""
		if len(rt.st.IPs) > 0 {
			host = rt.st.IPs[0]
		}
		timeout := time.Until(deadlineOr(ctx, time.Now().Add(30*time.Second)))
		r, msg := probe.Run(ctx, corev1.ProbeHandler{HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}, timeout, probe.Target{Host: host, Ports: c.Ports})
		if r != probe.Success {
			logger.Info("PreStop hook failed", "message", msg)
		}
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func deadlineOr(ctx context.Context, d time.Time) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// killPod stops every container (see stopContainers), waits for them and
// records how they ended. It returns false, recording nothing, when ctx
// ended first: the agent is stopping, and the next one adopts the pod.
func (a *Agent) killPod(ctx context.Context, rt *podRuntime, pod *corev1.Pod, grace time.Duration) bool {
	a.stopContainers(ctx, rt, pod, grace)
	if ctx.Err() != nil {
		return false
	}
	a.recordExits(rt, pod)
	return true
}

// stopContainers stops the app containers at once (preStop, SIGTERM,
// SIGKILL after grace) and waits for them; then, as kubelet does, the
// sidecars one at a time in reverse order, within what is left of grace,
// so they serve the app containers to the end. It changes no runtime
// state, so the pod's status can be written meanwhile.
func (a *Agent) stopContainers(ctx context.Context, rt *podRuntime, pod *corev1.Pod, grace time.Duration) {
	deadline := time.Now().Add(grace)
	var sidecars []*corev1.Container
	if pod != nil {
		for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
			if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
				sidecars = append(sidecars, c)
			}
		}
	}
	var wg sync.WaitGroup
	for name, cr := range rt.ctrs {
		if cr.proc == nil || slices.ContainsFunc(sidecars, func(c *corev1.Container) bool { return c.Name == name }) {
			continue
		}
		var spec *corev1.Container
		if pod != nil {
			for i := range pod.Spec.Containers {
				if pod.Spec.Containers[i].Name == name {
					spec = &pod.Spec.Containers[i]
				}
			}
		}
		a.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", name)
		wg.Add(1)
		go func() { defer wg.Done(); a.stopContainer(ctx, rt, pod, spec, cr, grace) }()
	}
	wg.Wait()
	for _, c := range sidecars {
		if cr := rt.ctrs[c.Name]; cr != nil && cr.proc != nil {
			a.event(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
			left := max(time.Until(deadline), 0)
			if grace > 0 {
				left = max(left, time.Millisecond) // still minStopGrace after SIGTERM
			}
			a.stopContainer(ctx, rt, pod, c, cr, left)
		}
	}
}

// recordExits records the end of every container that was running.
func (a *Agent) recordExits(rt *podRuntime, pod *corev1.Pod) {
	now := time.Now()
	for _, cr := range rt.ctrs {
		if cr.proc != nil {
			a.recordExit(rt, pod, cr, now)
		}
	}
}

// cleanup removes the pod's sandbox, network and files.
func (a *Agent) cleanup(ctx context.Context, rt *podRuntime) {
	if rt.sandbox != nil {
		rt.sandbox.Signal(syscall.SIGKILL)
		select {
		case <-rt.sandbox.Done():
		case <-time.After(5 * time.Second):
		}
	}
	if a.net != nil && !rt.st.HostNetwork {
		if err := a.net.Detach(ctx, string(rt.st.UID)); err != nil {
			klog.FromContext(ctx).Error(err, "Free pod addresses")
		}
	}
	rt.cleaned = true
	rt.sandboxUp = false
	for _, cr := range rt.ctrs {
		if cr.cancel != nil {
			cr.cancel()
		}
	}
	// Logs stay readable until the pod object is gone; state goes now so
	// a restarted agent does not adopt the pod again.
	os.Remove(filepath.Join(rt.dir, "state.json"))
	os.RemoveAll(filepath.Join(rt.dir, "etc"))
	if rt.terminating {
		os.RemoveAll(rt.dir)
	}
}

// view is what container c's status is made from now; policy is how it
// restarts, for the back-off it may be waiting out.
func (rt *podRuntime) view(c *corev1.Container, policy corev1.RestartPolicy) containerView {
	cr := rt.ctr(c.Name)
	v := containerView{Name: c.Name, Image: c.Image, ID: cr.st.ID, RestartCount: cr.st.RestartCount,
		Running: cr.proc != nil, StartedAt: cr.st.StartedAt, Exited: cr.st.Exited, Last: cr.st.Last,
		WaitingReason: cr.waitReason, WaitingMessage: cr.waitMessage, Started: cr.started.Load()}
	v.Ready = running(cr.proc) && v.Started && (c.ReadinessProbe == nil || cr.ready.Load())
	if v.Exited != nil && !rt.terminating && !rt.cleaned && restarts(policy, v.Exited.ExitCode) && time.Until(cr.st.BackOffUntil) > 0 {
		v.BackOff = max(cr.st.BackOff.Delay/2, backOffInitial)
	}
	return v
}

// podStatus is the pod's status as the agent sees it now.
func (a *Agent) podStatus(pod *corev1.Pod, rt *podRuntime) *corev1.PodStatus {
	st := pod.Status.DeepCopy()
	var statuses []corev1.ContainerStatus
	for i := range pod.Spec.Containers {
		statuses = append(statuses, containerStatus(rt.view(&pod.Spec.Containers[i], pod.Spec.RestartPolicy), pod))
	}
	initStatuses := a.initContainerStatuses(pod, rt)
	phase := podPhase(pod.Spec.RestartPolicy, pod.Spec.Containers, statuses)
	if initFailed(pod.Spec.RestartPolicy, pod.Spec.InitContainers, initStatuses) {
		phase = corev1.PodFailed // and no app container ever starts
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		phase = pod.Status.Phase // a finished pod stays finished
	}
	st.Phase = phase
	st.Conditions = podConditions(pod, initStatuses, statuses, phase, rt.sandboxUp, time.Now())
	st.InitContainerStatuses, st.ContainerStatuses = initStatuses, statuses
	st.HostIP, st.HostIPs = "", nil
	for i, ip := range a.hostIPs() {
		if i == 0 {
			st.HostIP = ip
		}
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
	}
	st.PodIP, st.PodIPs = "", nil
	for i, ip := range rt.st.IPs {
		if i == 0 {
			st.PodIP = ip
		}
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
	}
	if !rt.st.StartTime.IsZero() {
		st.StartTime = ptr.To(metaTime(rt.st.StartTime))
	}
	return st
}

// statusRetry is how soon a status write that failed is tried again.
const statusRetry = time.Second

// writeStatus writes the pod's status when it changed, through the status
// subresource, retrying on conflict with the latest pod. It reports false
// when the status may not be written: the caller must try again soon, as
// nothing else would (a probe result that does not change again never
// wakes the worker).
func (a *Agent) writeStatus(ctx context.Context, pod *corev1.Pod, rt *podRuntime) (*corev1.PodStatus, bool) {
	cur := rt.statusBase(pod)
	st := a.podStatus(cur, rt)
	if equality.Semantic.DeepEqual(*st, cur.Status) || (rt.lastWritten != nil && equality.Semantic.DeepEqual(st, rt.lastWritten)) {
		return st, true
	}
	pods := a.client.CoreV1().Pods(pod.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		upd := cur.DeepCopy()
		upd.Status = *st
		got, err := pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		switch {
		case err == nil:
			rt.lastWritten, rt.lastPod = st, got
			return st, true
		case apierrors.IsNotFound(err):
			return st, true
		case apierrors.IsConflict(err):
			fresh, gerr := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) || (gerr == nil && fresh.UID != pod.UID) {
				return st, true
			}
			if gerr != nil {
				klog.FromContext(ctx).Error(gerr, "Get pod after a status conflict")
				return st, false
			}
			cur = fresh
			st = a.podStatus(fresh, rt)
		default:
			klog.FromContext(ctx).Error(err, "Update pod status")
			return st, false
		}
	}
	return st, false
}

// statusBase is the newest copy of the pod the agent has: the informer's,
// or the one its last status write returned while the informer has not
// caught up with that write yet. Writing from the informer's copy then
// would only conflict and cost a GET and a second write; with a probe
// result arriving right after the container started, that was the common
// case.
func (rt *podRuntime) statusBase(pod *corev1.Pod) *corev1.Pod {
	last := rt.lastPod
	if last == nil || last.UID != pod.UID {
		return pod
	}
	// Resource versions are opaque in the API, but this API server's come
	// from etcd revisions; when either does not parse, trust the informer.
	seen, err1 := strconv.ParseUint(pod.ResourceVersion, 10, 64)
	wrote, err2 := strconv.ParseUint(last.ResourceVersion, 10, 64)
	if err1 != nil || err2 != nil || seen >= wrote {
		return pod
	}
	return last
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
