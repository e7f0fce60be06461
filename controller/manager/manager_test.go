package manager

import (
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
