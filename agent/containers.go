//go:build linux

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/envvars"
	"portal.dev/portal/agent/resolvconf"
)

// syncContainer notices a container's exit, restarts it when policy and
// back-off allow, and starts it the first time. It returns when to look
// again (a back-off ending), or 0.
func (a *Agent) syncContainer(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime, c *corev1.Container, policy corev1.RestartPolicy) time.Duration {
	cr := rt.ctr(c.Name)
	now := time.Now()
	if cr.proc != nil {
		select {
		case <-cr.proc.Done():
			a.recordExit(rt, c.Name, cr, now)
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

// recordExit records the end of container name's run.
func (a *Agent) recordExit(rt *podRuntime, name string, cr *ctrRuntime, now time.Time) {
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
	a.markOOMKilled(rt.st.UID, name, st)
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
	if cr.mounts, err = a.containerMounts(pod, rt, c); err != nil {
		return nil, err
	}
	spec := container.Spec{Path: path, Args: argv, Env: cr.env, Dir: c.WorkingDir, Stdout: log, Stderr: log,
		Namespaces: rt.namespaces(), Mounts: cr.mounts, Init: a.opts.InitPath}
	if spec.ExitFile, err = rt.exitFile(pod, c); err != nil {
		return nil, err
	}
	cr.st.ExitFile = spec.ExitFile
	if err := a.joinCgroup(pod, c, cr, &spec); err != nil {
		return nil, err
	}
	spec.UID, spec.GID = runAs(pod, c)
	cr.stdin = nil
	if !c.Stdin {
		return a.runtime.Start(spec)
	}
	held, started, err := holdStdin(&spec, c.TTY, c.StdinOnce, log)
	if err != nil {
		return nil, err
	}
	proc, err := a.runtime.Start(spec)
	started(proc, err)
	cr.stdin = held
	return proc, err
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
