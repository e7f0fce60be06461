//go:build linux

package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"portal.dev/portal/agent/container"
	"portal.dev/portal/agent/podnet"
)

// Process is one pod process as the pod loop sees it: a sandbox or a
// container run. *container.Process is the real one.
type Process interface {
	// ID is the PID and its start time, which tells a reused PID apart.
	ID() (pid int, start uint64)
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// ExitCode is the exit code once Done is closed; known is false when
	// the status went elsewhere (an adopted process).
	ExitCode() (code int, known bool)
	// Signal sends sig to the process's whole group.
	Signal(sig syscall.Signal) error
	// GroupGone says whether no process of the group is left.
	GroupGone() bool
}

// Runtime starts and adopts pod processes. The pod loop reaches the
// node's processes only through it, so it can be tested without root.
type Runtime interface {
	// Start starts the process spec describes. A sandbox (spec.Pause)
	// is returned once it holds its namespaces with the pod's host name.
	Start(spec container.Spec) (Process, error)
	// Run runs a one-off command (exec probes and hooks) and returns its
	// exit code and output.
	Run(ctx context.Context, spec container.Spec, stdin []byte) (int, []byte, error)
	// Adopt takes back process pid an earlier agent started, when it
	// still runs with start time start.
	Adopt(pid int, start uint64) (Process, bool)
}

// Network is the node's pod network as the agent uses it; *podnet.Network
// is the real one.
type Network interface {
	// Setup builds the node side of the network; it is idempotent.
	Setup(ctx context.Context) error
	// SyncPeers routes the other nodes' pod CIDRs.
	SyncPeers(ctx context.Context, peers []podnet.Peer) error
	// Attach gives the network namespace of process pid an interface and
	// addresses, owned by id.
	Attach(ctx context.Context, id string, pid int) ([]netip.Addr, error)
	// Detach frees what Attach gave id.
	Detach(ctx context.Context, id string) error
	// Owners are the ids that hold addresses.
	Owners() []string
}

// NetworkConfig is what a pod network is made from.
type NetworkConfig = podnet.Config

// processRuntime is the Runtime of agent/container: real processes in
// Linux namespaces.
type processRuntime struct{}

func (processRuntime) Start(spec container.Spec) (Process, error) {
	p, err := container.Start(spec)
	if err != nil {
		return nil, err
	}
	if spec.Pause {
		waitPaused(p)
	}
	return p, nil
}

func (processRuntime) Run(ctx context.Context, spec container.Spec, stdin []byte) (int, []byte, error) {
	return container.Run(ctx, spec, stdin)
}

func (processRuntime) Adopt(pid int, start uint64) (Process, bool) {
	p, ok := container.Adopt(pid, start)
	if !ok {
		return nil, false
	}
	return p, true
}

// waitPaused waits (briefly) until the sandbox's init helper has set the
// host name and become `sleep`, so containers see the pod's host name.
func waitPaused(sb *container.Process) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sb.Pid))
		if strings.TrimSpace(string(comm)) == "sleep" {
			return
		}
		select {
		case <-sb.Done():
			return
		default:
		}
	}
}

// newPodNetwork is the real pod network, agent/podnet's.
func newPodNetwork(cfg NetworkConfig) Network { return podnet.New(cfg) }
