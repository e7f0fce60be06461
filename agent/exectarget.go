//go:build linux

package agent

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/agent/container"
)

// execTarget is what a command run inside one container's current run
// needs (kubectl exec, port-forward): captured by the pod's worker, which
// alone owns the pod's runtime, after each sync.
type execTarget struct {
	proc     Process
	env      []string
	dir      string // the container's workingDir
	ns       container.Namespaces
	mounts   []container.Mount
	uid, gid *int64
	log      string     // the current run's log file
	stdin    *heldStdin // nil unless the container has stdin: true
	cgroups  []string   // the container's cgroup.procs files
}

// podTargets are the parts of a pod that streaming sessions reach: its
// network namespace while its sandbox is up (port-forward, which kubelet
// also serves from the sandbox alone) and its running containers (exec).
type podTargets struct {
	up    bool
	netns string // "" with hostNetwork: the agent's own
	ctrs  map[string]*execTarget
	// ips are the pod's own addresses while its sandbox is up, the only
	// ones /dial reaches; none with hostNetwork, whose addresses are the
	// node's.
	ips []netip.Addr
}

// publishTargets records what of w's pod the streaming handlers may reach;
// a container that is not running has no target.
func (a *Agent) publishTargets(w *podWorker) {
	pod, _ := w.get()
	pt := &podTargets{ctrs: map[string]*execTarget{}}
	if rt := w.rt; rt != nil && pod != nil && !rt.cleaned && rt.sandboxUp {
		pt.up, pt.netns = true, rt.namespaces().Net
		if !pod.Spec.HostNetwork {
			for _, ip := range rt.st.IPs {
				if addr, err := netip.ParseAddr(ip); err == nil {
					pt.ips = append(pt.ips, addr)
				}
			}
		}
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				cr, ok := rt.ctrs[cs[i].Name]
				if !ok || !running(cr.proc) {
					continue
				}
				t := &execTarget{proc: cr.proc, env: cr.env, dir: cs[i].WorkingDir, ns: rt.namespaces(), mounts: rt.st.Mounts, stdin: cr.stdin,
					log: filepath.Join(rt.dir, "logs", cs[i].Name, fmt.Sprintf("%d.log", cr.st.RestartCount))}
				t.uid, t.gid = runAs(pod, &cs[i])
				if a.cgroups != nil {
					t.cgroups = existing(a.cgroups.Procs(string(pod.UID), cs[i].Name))
				}
				pt.ctrs[cs[i].Name] = t
			}
		}
	}
	w.mu.Lock()
	w.targets = pt
	w.mu.Unlock()
}

// existing is procs when every one of them exists, else none. A
// container started outside the cgroup the agent would give it now (by
// an agent without cgroups before an upgrade, or under a v1 parent the
// agent has since moved from) runs in none of Portal's, and its exec'd
// commands run as it does rather than fail to join.
func existing(procs []string) []string {
	for _, p := range procs {
		if _, err := os.Stat(p); err != nil {
			return nil
		}
	}
	return procs
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

// targets returns the pod namespace/name and what of it is reachable.
func (a *Agent) targets(namespace, name string) (*corev1.Pod, *podTargets, error) {
	pod, err := a.pods.Pods(namespace).Get(name)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s not found on node %s", namespace, name, a.opts.NodeName)
	}
	a.mu.Lock()
	w := a.workers[pod.UID]
	a.mu.Unlock()
	if w == nil {
		return pod, &podTargets{}, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.targets == nil {
		return pod, &podTargets{}, nil
	}
	return pod, w.targets, nil
}

// runningContainer returns the running container ctr of pod
// namespace/name.
func (a *Agent) runningContainer(namespace, name, ctr string) (*execTarget, error) {
	_, pt, err := a.targets(namespace, name)
	if err != nil {
		return nil, err
	}
	if t := pt.ctrs[ctr]; t != nil {
		return t, nil
	}
	return nil, errNoContainer(ctr)
}
