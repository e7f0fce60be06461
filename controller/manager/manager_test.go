package manager

import (
	"strings"
	"testing"
	"testing/synctest"
)

// TestGateWaitsForTheTerm pins what Run relies on when leadership ends:
// closing the gate waits for the term's controllers to stop, and a term
// whose callback starts only after that does not start at all.
func TestGateWaitsForTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{}
		if !g.enter() {
			t.Fatal("an open gate refused a term")
		}
		closed := make(chan struct{})
		go func() { g.closeAndWait(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("closeAndWait returned while a term was still inside")
		default:
		}
		g.leave()
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Fatal("closeAndWait did not return once the term left")
		}
		if g.enter() {
			t.Error("a closed gate let a late term in")
		}
	})
}

func TestValidateRefusesANodeMaskThatDoesNotFit(t *testing.T) {
	o := DefaultOptions()
	o.ClusterCIDR = "10.244.0.0/25" // smaller than the /24 each node gets
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "node mask size /24 is larger than the cluster CIDR") {
		t.Errorf("Validate: got %v, want the node mask size refused", err)
	}
	o.ClusterCIDR = "10.244.0.0/16"
	if err := o.Validate(); err != nil {
		t.Errorf("Validate of the defaults with a /16: %v", err)
	}
}
