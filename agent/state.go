//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/satoken"
	"portal.dev/portal/pki"
)

// podState is what survives an agent restart, in pods/<uid>/state.json.
type podState struct {
	UID          types.UID            `json:"uid"`
	Namespace    string               `json:"namespace"`
	Name         string               `json:"name"`
	HostNetwork  bool                 `json:"hostNetwork,omitempty"`
	SandboxPid   int                  `json:"sandboxPid,omitempty"`
	SandboxStart uint64               `json:"sandboxStart,omitempty"`
	IPs          []string             `json:"ips,omitempty"`
	StartTime    time.Time            `json:"startTime"`
	Grace        int64                `json:"grace"`
	Containers   map[string]*ctrState `json:"containers"`
	Env          map[string][]string  `json:"env,omitempty"`
	Mounts       []container.Mount    `json:"mounts,omitempty"`
}

// ctrState is one container's history.
type ctrState struct {
	Pid          int                              `json:"pid,omitempty"`
	Start        uint64                           `json:"start,omitempty"`
	ID           string                           `json:"id,omitempty"`
	StartedAt    time.Time                        `json:"startedAt"`
	RestartCount int32                            `json:"restartCount"`
	Ran          bool                             `json:"ran,omitempty"`
	Exited       *corev1.ContainerStateTerminated `json:"exited,omitempty"`
	Last         *corev1.ContainerStateTerminated `json:"last,omitempty"`
	BackOff      backOff                          `json:"backOff"`
	BackOffUntil time.Time                        `json:"backOffUntil"`
	Started      bool                             `json:"started,omitempty"`
	Ready        bool                             `json:"ready,omitempty"`
	// StartedOnce says a sidecar has run and passed its startup probe in
	// this pod: the init containers after it no longer wait for it.
	StartedOnce bool `json:"startedOnce,omitempty"`
	// ExitFile is where the init helper writes the exit code of an init
	// container, whose success a restarted agent must know.
	ExitFile string `json:"exitFile,omitempty"`
	// OOMKills is the container cgroup's out-of-memory kill count when
	// the current run started (or when the last kill was noticed).
	OOMKills uint64 `json:"oomKills,omitempty"`
}

// podRuntime is a pod's processes. Only its worker goroutine changes it,
// except the probe results, which are atomic.
type podRuntime struct {
	dir       string
	st        podState
	sandbox   Process
	ctrs      map[string]*ctrRuntime
	sandboxUp bool
	cleaned   bool
	// statusOwed says a cleaned pod's last status (its stopped
	// sidecars) failed to be written: its syncs write it again.
	statusOwed  bool
	terminating bool
	deleteSent  bool
	lastWritten *corev1.PodStatus
	lastPod     *corev1.Pod // as the last status write returned it
	// tokens says when each ServiceAccount token volume is refreshed; it
	// is not saved, so a restarted agent writes fresh tokens.
	tokens satoken.Issued
}

func (rt *podRuntime) key() string { return rt.st.Namespace + "/" + rt.st.Name }

// ctrRuntime is one container's live state.
type ctrRuntime struct {
	st          *ctrState
	proc        Process
	stdin       *heldStdin // the current run's, for kubectl attach
	cancel      context.CancelFunc
	started     atomic.Bool
	ready       atomic.Bool
	liveFailed  atomic.Value // string: why the container must restart
	killing     bool
	waitReason  string
	waitMessage string
	env         []string
	// mounts are the container's bind mounts, the pod's and its token
	// volumes', for its exec probes and hooks too.
	mounts []container.Mount
}

func (a *Agent) podDir(uid types.UID) string {
	return filepath.Join(a.opts.RootDir, "pods", string(uid))
}

func (a *Agent) newRuntime(pod *corev1.Pod) *podRuntime {
	rt := &podRuntime{dir: a.podDir(pod.UID), ctrs: map[string]*ctrRuntime{},
		st: podState{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name, HostNetwork: pod.Spec.HostNetwork,
			Containers: map[string]*ctrState{}, Env: map[string][]string{}}}
	return rt
}

func (rt *podRuntime) ctr(name string) *ctrRuntime {
	if c, ok := rt.ctrs[name]; ok {
		return c
	}
	st, ok := rt.st.Containers[name]
	if !ok {
		st = &ctrState{}
		rt.st.Containers[name] = st
	}
	c := &ctrRuntime{st: st, env: rt.st.Env[name]}
	c.started.Store(st.Started)
	c.ready.Store(st.Ready)
	rt.ctrs[name] = c
	return c
}

var saveMu sync.Mutex

// save writes the pod's state file atomically.
func (rt *podRuntime) save() error {
	for name, c := range rt.ctrs {
		c.st.Started, c.st.Ready = c.started.Load(), c.ready.Load()
		rt.st.Env[name] = c.env
	}
	data, err := json.Marshal(&rt.st)
	if err != nil {
		return err
	}
	saveMu.Lock()
	defer saveMu.Unlock()
	if err := os.MkdirAll(rt.dir, 0o700); err != nil {
		return err
	}
	return pki.WriteFileAtomic(filepath.Join(rt.dir, "state.json"), data, 0o600)
}

// loadStates reads the state files of an earlier agent and adopts the
// processes that still run.
func (a *Agent) loadStates(ctx context.Context) map[types.UID]*podRuntime {
	logger := klog.FromContext(ctx)
	out := map[types.UID]*podRuntime{}
	entries, _ := os.ReadDir(filepath.Join(a.opts.RootDir, "pods"))
	for _, e := range entries {
		dir := filepath.Join(a.opts.RootDir, "pods", e.Name())
		data, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			continue
		}
		rt := &podRuntime{dir: dir, ctrs: map[string]*ctrRuntime{}}
		if err := json.Unmarshal(data, &rt.st); err != nil {
			logger.Error(err, "Unreadable pod state; ignored", "dir", dir)
			continue
		}
		if rt.st.Containers == nil {
			rt.st.Containers = map[string]*ctrState{}
		}
		if rt.st.Env == nil {
			rt.st.Env = map[string][]string{}
		}
		sandboxAlive := rt.st.HostNetwork
		if !rt.st.HostNetwork && rt.st.SandboxPid > 0 {
			if p, ok := a.runtime.Adopt(rt.st.SandboxPid, rt.st.SandboxStart); ok {
				rt.sandbox, rt.sandboxUp, sandboxAlive = p, true, true
			}
		}
		if rt.st.HostNetwork {
			rt.sandboxUp = true
		}
		adopted := 0
		for name, cs := range rt.st.Containers {
			c := rt.ctr(name)
			if cs.Pid == 0 {
				continue
			}
			p, ok := a.runtime.Adopt(cs.Pid, cs.Start)
			switch {
			case ok && sandboxAlive:
				c.proc = p
				adopted++
			case ok:
				// Its network namespace is gone with the sandbox: the
				// container cannot go on.
				p.Signal(9)
				c.proc = p
			default:
				// It ended while no agent was its parent.
				cs.Pid = 0
				cs.Exited = lostExit(cs, time.Now())
			}
		}
		logger.Info("Adopted pod from an earlier run", "pod", rt.key(), "uid", rt.st.UID, "sandbox", sandboxAlive, "containers", adopted)
		out[rt.st.UID] = rt
	}
	// Pod events take runtimes out of a.adopted while the caller still
	// reads what it got: each has a map of its own.
	a.mu.Lock()
	a.adopted = maps.Clone(out)
	a.mu.Unlock()
	return out
}

// exitState is the end of a container run that exited with code.
func exitState(cs *ctrState, code int, now time.Time) *corev1.ContainerStateTerminated {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	return &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason,
		StartedAt: metaTime(cs.StartedAt), FinishedAt: metaTime(now), ContainerID: cs.ID}
}

// lostExit is the end of a container whose exit status went elsewhere (it
// was adopted, or exited while no agent ran): the exit file when it has
// one (init containers, whose success must be known), else unknown.
func lostExit(cs *ctrState, now time.Time) *corev1.ContainerStateTerminated {
	if cs.ExitFile != "" {
		if code, known := container.ReadExitFile(cs.ExitFile); known {
			return exitState(cs, code, now)
		}
	}
	return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
		Message:   "the container exited while the agent was not its parent; its exit status is unknown",
		StartedAt: metaTime(cs.StartedAt), FinishedAt: metaTime(now), ContainerID: cs.ID}
}

// cleanOrphanAddresses frees addresses whose pod has no runtime any more.
func (a *Agent) cleanOrphanAddresses(ctx context.Context) {
	a.mu.Lock()
	known := map[string]bool{}
	for uid := range a.workers {
		known[string(uid)] = true
	}
	for uid := range a.adopted {
		known[string(uid)] = true
	}
	a.mu.Unlock()
	for _, id := range a.net.Owners() {
		if !known[id] {
			klog.FromContext(ctx).Info("Freeing the address of a pod that is gone", "uid", id)
			a.net.Detach(ctx, id)
		}
	}
}

func ctrID(uid types.UID, name string, n int32) string {
	u := string(uid)
	if len(u) > 8 {
		u = u[:8]
	}
	return fmt.Sprintf("portal://%s-%s-%d", u, name, n)
}

// KillPods kills the process groups of every pod process recorded under
// rootDir (an agent's --root-dir). Pod processes live in namespaces of
// their own and outlive a killed agent: tests and benchmarks clean up
// with it.
func KillPods(rootDir string) {
	files, _ := filepath.Glob(filepath.Join(rootDir, "pods", "*", "state.json"))
	for _, f := range files {
		var st podState
		data, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(data, &st) != nil {
			continue
		}
		for _, c := range st.Containers {
			if c != nil && c.Pid > 0 {
				syscall.Kill(-c.Pid, syscall.SIGKILL)
			}
		}
		if st.SandboxPid > 0 {
			syscall.Kill(-st.SandboxPid, syscall.SIGKILL)
		}
	}
}
