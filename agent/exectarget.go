//go:build linux

package agent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/agent/container"
)

// execTarget is what a command run inside one container's current run
// needs (kubectl exec, port-forward): captured by the pod's worker, which
// alone owns the pod's runtime, after each sync.
type execTarget struct {
	proc     Process
	env      []string
	ns       container.Namespaces
	mounts   []container.Mount
	uid, gid *int64
}

// publishTargets records the running containers of w's pod for the
// streaming handlers; a container that is not running has no target.
func (a *Agent) publishTargets(w *podWorker) {
	pod, _ := w.get()
	targets := map[string]*execTarget{}
	if rt := w.rt; rt != nil && pod != nil && !rt.cleaned {
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				cr, ok := rt.ctrs[cs[i].Name]
				if !ok || !running(cr.proc) {
					continue
				}
				t := &execTarget{proc: cr.proc, env: cr.env, ns: rt.namespaces(), mounts: rt.st.Mounts}
				t.uid, t.gid = runAs(pod, &cs[i])
				targets[cs[i].Name] = t
			}
		}
	}
	w.mu.Lock()
	w.targets = targets
	w.mu.Unlock()
}

// runAs is the user and group c's processes run as: the container's
// security context, else the pod's.
func runAs(pod *corev1.Pod, c *corev1.Container) (uid, gid *int64) {
	if sc := c.SecurityContext; sc != nil {
		uid, gid = sc.RunAsUser, sc.RunAsGroup
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if uid == nil {
			uid = psc.RunAsUser
		}
		if gid == nil {
			gid = psc.RunAsGroup
		}
	}
	return uid, gid
}

// errNoContainer is kubelet's answer for a container that is not running
// (not started yet, exited, or not in the pod).
type errNoContainer string

func (e errNoContainer) Error() string { return fmt.Sprintf("container not found (%q)", string(e)) }

// target returns the running container ctr of pod namespace/name, and the
// pod.
func (a *Agent) target(namespace, name, ctr string) (*corev1.Pod, *execTarget, error) {
	pod, err := a.pods.Pods(namespace).Get(name)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s not found on node %s", namespace, name, a.opts.NodeName)
	}
	a.mu.Lock()
	w := a.workers[pod.UID]
	a.mu.Unlock()
	if w == nil {
		return pod, nil, errNoContainer(ctr)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ctr == "" {
		// Port-forward: any running container shares the pod's network.
		for _, t := range w.targets {
			return pod, t, nil
		}
	}
	t := w.targets[ctr]
	if t == nil {
		return pod, nil, errNoContainer(ctr)
	}
	return pod, t, nil
}
