//go:build linux

package agent

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An agent that starts on a node with pods already bound to it starts each
// of them once. Its pod events arrive while Run reports readiness, so under
// -race this also pins Run counting the pod workers without the lock.
func TestRunStartsBoundPods(t *testing.T) {
	const n = 30
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, sleeper(fmt.Sprintf("p%d", i), corev1.RestartPolicyAlways))
	}
	rtm := &fakeRuntime{started: make(chan *fakeProc, n)}
	a, _, _ := testAgent(t, rtm, pods...)
	defer rtm.exitAll()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	started := map[types.UID]int{}
	for range n {
		p := <-rtm.started
		for _, e := range p.spec.Env {
			if len(e) > 9 && e[:9] == "HOSTNAME=" {
				started[types.UID("uid-"+e[9:])]++
			}
		}
	}
	<-a.BecameReady()
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, p := range pods {
		if got := started[p.UID]; got != 1 {
			t.Errorf("pod %s: started %d times, want 1", p.Name, got)
		}
	}
	if got := len(rtm.containers()); got != n {
		t.Errorf("container runs: got %d, want %d", got, n)
	}
}
