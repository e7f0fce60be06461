package memrelease

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const mib = 1 << 20

var testPolicy = Policy{Interval: 10 * time.Second, BusyRate: 8 * mib, QuietRate: 2 * mib, MinExcess: 32 * mib, AgainExcess: 16 * mib, Again: 3}

// step is one interval: what it allocated per second and the excess at its
// end.
type step struct {
	rate   uint64 // MiB/s
	excess uint64 // MiB
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		want  []bool // release after each step
		// after is the excess (MiB) just after the release at a step;
		// 0 when not given.
		after map[int]uint64
	}{
		{
			name:  "idle process: never",
			steps: []step{{0, 100}, {1, 100}, {0, 100}},
			want:  []bool{false, false, false},
		},
		{
			name:  "load then quiet with excess: once",
			steps: []step{{50, 200}, {0, 200}, {0, 200}},
			want:  []bool{false, true, false},
		},
		{
			name:  "load, tapering, then quiet: once quiet",
			steps: []step{{50, 200}, {5, 200}, {1, 200}},
			want:  []bool{false, false, true},
		},
		{
			name:  "load then quiet, little excess: not worth it",
			steps: []step{{50, 10}, {0, 10}},
			want:  []bool{false, false},
		},
		{
			name:  "quiet without excess ends the burst: a later excess needs new load",
			steps: []step{{50, 10}, {0, 10}, {0, 200}},
			want:  []bool{false, false, false},
		},
		{
			name:  "each burst: one release",
			steps: []step{{50, 200}, {0, 200}, {30, 150}, {0, 150}},
			want:  []bool{false, true, false, true},
		},
		{
			name:  "quiet after a release: again once the excess is back, Again intervals on",
			steps: []step{{50, 200}, {0, 200}, {1, 40}, {1, 40}, {1, 40}, {1, 40}, {1, 10}, {1, 40}},
			want:  []bool{false, true, false, false, true, false, false, true},
		},
		{
			name:  "fragmentation a release cannot return: not again until the excess grows past it",
			steps: []step{{50, 200}, {0, 200}, {1, 40}, {1, 40}, {1, 40}, {1, 40}, {1, 50}, {1, 60}},
			want:  []bool{false, true, false, false, false, false, false, true},
			after: map[int]uint64{1: 40},
		},
		{
			name:  "quiet after a release: again for less excess than the first release needs",
			steps: []step{{50, 200}, {0, 200}, {1, 10}, {1, 10}, {1, 10}, {1, 20}},
			want:  []bool{false, true, false, false, false, true},
		},
		{
			name:  "idle process with excess but no burst: never",
			steps: []step{{1, 100}, {1, 100}, {1, 100}, {1, 100}, {1, 100}},
			want:  []bool{false, false, false, false, false},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &decider{policy: testPolicy}
			var s Sample
			d.observe(s)
			for i, st := range tc.steps {
				s.Allocated += st.rate * mib * uint64(testPolicy.Interval.Seconds())
				s.Excess = st.excess * mib
				got := d.observe(s)
				if got != tc.want[i] {
					t.Errorf("step %d (%d MiB/s, %d MiB excess): release %v, want %v", i, st.rate, st.excess, got, tc.want[i])
				}
				if got {
					d.releasedTo(tc.after[i] * mib)
				}
			}
		})
	}
}

// Run samples every interval and releases once after a burst.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var s Sample
		var releases atomic.Int32
		read := func() Sample {
			mu.Lock()
			defer mu.Unlock()
			return s
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			run(ctx, testPolicy, read, func() { releases.Add(1) })
			close(done)
		}()
		synctest.Wait()
		// One interval of load, then quiet ones.
		mu.Lock()
		s = Sample{Allocated: 500 * mib, Excess: 300 * mib}
		mu.Unlock()
		time.Sleep(testPolicy.Interval)
		synctest.Wait()
		if releases.Load() != 0 {
			t.Fatalf("released during the load")
		}
		time.Sleep(3 * testPolicy.Interval)
		synctest.Wait()
		if n := releases.Load(); n != 1 {
			t.Errorf("released %d times after the burst, want 1", n)
		}
		cancel()
		<-done
	})
}

func TestReadSeesTheHeap(t *testing.T) {
	keep := make([]byte, 8*mib)
	s := read()
	if s.Allocated < uint64(len(keep)) {
		t.Errorf("Allocated = %d after allocating %d", s.Allocated, len(keep))
	}
	_ = keep[0]
}
