// Package node sets up the node a benchmark runs in (a network namespace
// run.sh made): its links and addresses, a node credential, the portal
// components with a log file each, and their end, with the pods their
// agents started.
package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/agent"
)

// Run runs each command in turn (ip link, ip addr...) and stops at the
// first that fails, with what it said.
func Run(cmds ...[]string) error {
	for _, args := range cmds {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// Kubeconfig writes to out a kubeconfig for node name's components
// (system:node:NAME in system:nodes), for the API at server, made by
// portal from the server's data directory.
func Kubeconfig(portal, serverDir, name, server, out string) error {
	if b, err := exec.Command(portal, "kubeconfig", "--data-dir", serverDir, "--user", "system:node:"+name,
		"--group", "system:nodes", "--server", server, "-o", out).CombinedOutput(); err != nil {
		return fmt.Errorf("kubeconfig for %s: %v: %s", name, err, b)
	}
	return nil
}

// WaitReady waits until node name's Ready condition is True.
func WaitReady(ctx context.Context, c kubernetes.Interface, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && ready(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not Ready after %v", name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Procs are the processes a benchmark started; the zero value with Dir
// set is ready to use.
type Procs struct {
	// Dir holds each process's log, NAME.log.
	Dir   string
	procs []*exec.Cmd
}

// Start runs args with its output appended to Dir/NAME.log, inside the
// network namespace netns unless it is empty. The process is killed if
// the bench dies.
func (p *Procs) Start(name, netns string, args ...string) (*exec.Cmd, error) {
	f, err := os.OpenFile(filepath.Join(p.Dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p.procs = append(p.procs, cmd)
	return cmd, nil
}

// Add has Stop end cmd too, a process the bench started itself.
func (p *Procs) Add(cmd *exec.Cmd) { p.procs = append(p.procs, cmd) }

// Stop ends the processes, the last started first (see Stop), then kills
// the pod processes that the state of each agent root directory in
// agentRoots lists: pods live in namespaces of their own and outlive their
// agent.
func (p *Procs) Stop(agentRoots ...string) {
	for i := len(p.procs) - 1; i >= 0; i-- {
		Stop(p.procs[i])
	}
	p.procs = nil
	for _, root := range agentRoots {
		agent.KillPods(root)
	}
}

// Stop ends cmd, unless it has been waited for already: SIGTERM, and
// SIGKILL after ten seconds.
func Stop(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}
