package ingress

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// TestOnlyTheLeaderWritesStatus: of two replicas serving one class, one
// runs the status updater; when it stops, the other takes over.
func TestOnlyTheLeaderWritesStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var mu sync.Mutex
		running := map[string]bool{}
		work := func(name string) func(context.Context) error {
			return func(ctx context.Context) error {
				mu.Lock()
				running[name] = true
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				running[name] = false
				mu.Unlock()
				return nil
			}
		}
		replica := func(name string, port int) (context.CancelFunc, chan struct{}) {
			o := DefaultOptions()
			o.NodeName, o.HTTPPort = name, port
			c := &Controller{opts: o, client: client}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { c.whileLeading(ctx, work(name)); close(done) }()
			return cancel, done
		}
		stopA, doneA := replica("a", 80)
		synctest.Wait()
		stopB, doneB := replica("b", 81)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		if !running["a"] || running["b"] {
			t.Errorf("with a first: running %v, want a alone", running)
		}
		mu.Unlock()
		stopA()
		<-doneA
		// b looks every retry period, stretched by up to 2.2x with jitter.
		time.Sleep(statusRetryPeriod*22/10 + time.Second)
		synctest.Wait()
		mu.Lock()
		if running["a"] || !running["b"] {
			t.Errorf("after a stopped: running %v, want b alone", running)
		}
		mu.Unlock()
		stopB()
		<-doneB
	})
}

// TestFailedStatusWriterStepsDown: a leader whose status writer fails gives
// up the Lease, so another replica writes status instead of nobody.
func TestFailedStatusWriterStepsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var mu sync.Mutex
		running := map[string]bool{}
		work := func(name string, fail bool) func(context.Context) error {
			return func(ctx context.Context) error {
				if fail {
					return errors.New("status writer failed")
				}
				mu.Lock()
				running[name] = true
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				running[name] = false
				mu.Unlock()
				return nil
			}
		}
		replica := func(name string, port int, fail bool) (context.CancelFunc, chan struct{}) {
			o := DefaultOptions()
			o.NodeName, o.HTTPPort = name, port
			c := &Controller{opts: o, client: client}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { c.whileLeading(ctx, work(name, fail)); close(done) }()
			return cancel, done
		}
		stopA, doneA := replica("a", 80, true)
		synctest.Wait()
		stopB, doneB := replica("b", 81, false)
		// b looks every retry period, stretched by up to 2.2x with jitter.
		time.Sleep(statusRetryPeriod*22/10 + time.Second)
		synctest.Wait()
		mu.Lock()
		if !running["b"] {
			t.Errorf("after a's writer failed: running %v, want b writing status", running)
		}
		mu.Unlock()
		stopA()
		<-doneA
		stopB()
		<-doneB
	})
}
