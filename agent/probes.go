//go:build linux

package agent

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/probe"
)

// startProbes starts c's probe workers for its current run.
func (a *Agent) startProbes(ctx context.Context, w *podWorker, pod *corev1.Pod, rt *podRuntime, c *corev1.Container, cr *ctrRuntime) {
	pctx, cancel := context.WithCancel(ctx)
	cr.cancel = cancel
	host := ""
	if len(rt.st.IPs) > 0 {
		host = rt.st.IPs[0]
	}
	env, ns, mounts, proc := cr.env, rt.namespaces(), rt.st.Mounts, cr.proc
	if cr.mounts != nil {
		mounts = cr.mounts
	}
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
		// Unhealthy is recorded when the result turns to failure and, for
		// readiness, whenever a failing probe's message changes: a pod
		// that never became ready changes no result, and its last failure
		// is what portal explain and kubectl describe show. Repeats of one
		// message are left to the first event.
		var lastFailure string
		failed := func(msg string) {
			if msg != lastFailure {
				lastFailure = msg
				a.event(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", k, msg)
			}
		}
		wk := &probe.Worker{Kind: k, Probe: p, Target: target, StartedAt: startedAt, Gate: gate, OnResult: func(r probe.Result, msg string) {
			logger.V(2).Info("Probe result changed", "probe", k, "result", r, "message", msg)
			switch {
			case r == probe.Failure:
				failed(msg)
			case r == probe.Success:
				lastFailure = ""
				if msg != "" {
					a.event(pod, corev1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", k, msg)
				}
			}
			on(r, msg)
			w.kick()
		}}
		if k == probe.Readiness {
			wk.OnFailure = failed
		}
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
// included, as `kubectl exec` would; nsenter is small and quick to start.
// Otherwise it goes through the init helper, which costs a start of this
// whole binary once per probe period per pod.
func (a *Agent) execIn(ctx context.Context, proc Process, env []string, ns container.Namespaces, mounts []container.Mount, cmd []string) (int, []byte, error) {
	if len(cmd) == 0 {
		return 0, nil, fmt.Errorf("empty command")
	}
	path, err := lookPathIn(proc, cmd[0], env, "")
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
