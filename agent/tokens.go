//go:build linux

package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/satoken"
)

// tokenRetry is how soon a token that could not be had is asked for again.
const tokenRetry = 2 * time.Second

// volumeDir is where the agent writes the files of a pod's volume.
func (rt *podRuntime) volumeDir(volume string) string {
	return filepath.Join(rt.dir, "volumes", volume)
}

// syncTokens writes or refreshes the pod's ServiceAccount token volumes
// (see agent/satoken). It returns when to look again, and false when a
// volume has never been written, so the containers that mount it must not
// start yet.
func (a *Agent) syncTokens(ctx context.Context, pod *corev1.Pod, rt *podRuntime) (time.Duration, bool) {
	if rt.tokens == nil {
		rt.tokens = satoken.Issued{}
	}
	p := &satoken.Projector{Client: a.client, CA: a.opts.ClientCAData}
	next, err := p.Sync(ctx, pod, rt.volumeDir, rt.tokens)
	if err == nil {
		return next, true
	}
	klog.FromContext(ctx).Info("Service account token not written", "err", err)
	for _, v := range satoken.Volumes(pod) {
		if _, ok := rt.tokens[v.Name]; !ok {
			a.event(pod, corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed for volume %q: %v", v.Name, err)
			return tokenRetry, false
		}
	}
	// A refresh failed; the current token still works for a while.
	return tokenRetry, true
}

// containerMounts are the pod's mounts plus the token volumes c mounts.
// The mount points are made on the node, as a container runtime makes them
// in an image's root: the pod's processes share the node's file system.
func (a *Agent) containerMounts(pod *corev1.Pod, rt *podRuntime, c *corev1.Container) ([]container.Mount, error) {
	tokens := satoken.Mounts(pod, c, rt.volumeDir)
	if len(tokens) == 0 {
		return rt.st.Mounts, nil
	}
	out := slices.Clone(rt.st.Mounts)
	for _, m := range tokens {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return nil, err
		}
		out = append(out, container.Mount{Source: m.Source, Target: m.Target})
	}
	return out, nil
}
