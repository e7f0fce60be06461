//go:build linux

package agent

import (
	"context"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent/cgroup"
	"portal.dev/portal/agent/container"
)

// detectCgroups finds the node's cgroup layout and makes the pods'
// parent. Without cgroups (none mounted, or a parent the agent may not
// make: not root, a read-only mount, a cgroup namespace whose root holds
// the agent) pods run unlimited and unmeasured, as before the agent had
// them; that is logged once, not fatal.
func (a *Agent) detectCgroups(ctx context.Context) {
	if _, ok := a.runtime.(processRuntime); !ok {
		return // a test's runtime starts no real process
	}
	if a.opts.CgroupRoot == "" {
		return
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err == nil {
		a.cgroups, err = cgroup.Detect(a.opts.CgroupRoot, string(self), a.opts.NodeName)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "No cgroups: pod limits are not enforced and pods are not measured")
		return
	}
	cpu := a.allocatable()[corev1.ResourceCPU]
	if err := a.cgroups.SetupParent(cpu.MilliValue()); err != nil {
		klog.FromContext(ctx).Error(err, "No cgroups: the pods' parent cgroup cannot be set up; pod limits are not enforced and pods are not measured")
		a.cgroups = nil
		return
	}
	klog.FromContext(ctx).V(1).Info("Pod cgroups", "version", a.cgroups.Version())
}

// limitsOf is what c's cgroup enforces from its resources. A CPU request
// defaults to the limit, as the API's defaulting makes it.
func limitsOf(c *corev1.Container) cgroup.Limits {
	var l cgroup.Limits
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		l.MemoryBytes = q.Value()
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		l.CPUMilli = q.MilliValue()
		l.CPURequestMilli = l.CPUMilli
	}
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		l.CPURequestMilli = q.MilliValue()
	}
	return l
}

// joinCgroup makes c's cgroup with its limits and has spec's process
// start in it. It remembers how many out-of-memory kills the cgroup has
// seen, so that the end of this run can tell whether it was one.
func (a *Agent) joinCgroup(pod *corev1.Pod, c *corev1.Container, cr *ctrRuntime, spec *container.Spec) error {
	if a.cgroups == nil {
		return nil
	}
	procs, err := a.cgroups.Container(string(pod.UID), c.Name, limitsOf(c))
	if err != nil {
		return err
	}
	spec.Cgroups = procs
	cr.st.OOMKills, _ = a.cgroups.OOMKills(string(pod.UID), c.Name)
	return nil
}

// markOOMKilled gives an ended run kubelet's reason when the kernel's
// out-of-memory killer struck in the container's cgroup during it: the
// kill count, not the signal, tells (a SIGKILL from anyone else looks the
// same).
func (a *Agent) markOOMKilled(uid types.UID, name string, st *ctrState) {
	if a.cgroups == nil || st.Exited == nil {
		return
	}
	n, err := a.cgroups.OOMKills(string(uid), name)
	if err != nil || n <= st.OOMKills {
		return
	}
	st.OOMKills = n
	st.Exited.Reason = "OOMKilled"
}

// removeCgroups removes a pod's cgroups once its processes are gone.
func (a *Agent) removeCgroups(ctx context.Context, uid types.UID) {
	if a.cgroups == nil {
		return
	}
	if err := a.cgroups.RemovePod(string(uid)); err != nil {
		klog.FromContext(ctx).V(2).Info("Pod cgroups not removed", "uid", uid, "err", err)
	}
}

// cleanOrphanCgroups removes the cgroups of pods this agent no longer
// runs (gone while no agent ran). Only this node's parent is looked in:
// another agent on the same machine has its own, so its pods' cgroups,
// even empty ones (a container in back-off, an ended run whose OOM kill
// count is yet to be read), are never this agent's to remove.
func (a *Agent) cleanOrphanCgroups(ctx context.Context) {
	if a.cgroups == nil {
		return
	}
	uids, err := a.cgroups.Pods()
	if err != nil {
		klog.FromContext(ctx).Error(err, "List pod cgroups")
		return
	}
	a.mu.Lock()
	var known []string
	for uid := range a.workers {
		known = append(known, string(uid))
	}
	a.mu.Unlock()
	for _, uid := range uids {
		if !slices.Contains(known, uid) {
			a.cgroups.RemovePod(uid)
		}
	}
}
