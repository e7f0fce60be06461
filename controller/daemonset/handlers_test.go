package daemonset

import "testing"

// A Node turning Ready is when its daemon Pods may start: the DaemonSets
// must be synced then, with nothing else about the Node changed.
func TestNodeTurningReadyQueuesDaemonSets(t *testing.T) {
	s := newStale(t, mkDS())
	s.c.onNodeUpdate(mkNode("n1", notReady), mkNode("n1"))
	if got := s.c.loop.Len(); got != 1 {
		t.Fatalf("queued keys: got %d, want 1", got)
	}
}
