//go:build !linux

package agent

import (
	"context"
	"fmt"
	"runtime"

	"k8s.io/client-go/kubernetes"
)

// Agent is the node agent, which runs on Linux only: pods are processes in
// Linux namespaces (agent/container, agent/podnet). Here New fails.
type Agent struct{}

// Runtime, Network and NetworkConfig are the pod loop's seams, defined on
// Linux only; these stand-ins keep Options one type everywhere.
type (
	Runtime       interface{}
	Network       interface{}
	NetworkConfig struct{}
)

// New fails: the node agent needs Linux.
func New(kubernetes.Interface, Options) (*Agent, error) {
	return nil, fmt.Errorf("the node agent needs Linux (this is %s): it runs pods in Linux network, UTS, IPC and mount namespaces", runtime.GOOS)
}

// Ready is never true: no agent runs here.
func (*Agent) Ready() bool { return false }

// BecameReady is never closed: no agent runs here.
func (*Agent) BecameReady() <-chan struct{} { return nil }

// Run is never reached: New fails.
func (*Agent) Run(context.Context) error { return fmt.Errorf("the node agent needs Linux") }
