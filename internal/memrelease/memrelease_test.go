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

var testPolicy = Policy{Interval: 10 * time.Second, BusyRate: 8 * mib, QuietRate: 2 * mib, MinExcess: 32 * mib, AgainExcess: 16 * mib, Again: 3,
	QuietGCPercent: 25, Watch: time.Second}

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
			run(ctx, testPolicy, read, func() { releases.Add(1) }, func(int) int { return 100 })
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

// gcPercent is a fake debug.SetGCPercent.
type gcPercent struct {
	mu      sync.Mutex
	percent int
}

func (g *gcPercent) set(p int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.percent
	g.percent = p
	return prev
}

func (g *gcPercent) get() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.percent
}

// While the process stays quiet after a release GOGC is the quiet one, and
// it is back within a Watch of load returning, long before the next
// interval ends. A GOGC that is off stays off.
func TestQuietGOGC(t *testing.T) {
	tests := []struct {
		name       string
		gogc       int
		wantQuiet  int
		wantLoaded int
	}{
		{name: "default GOGC", gogc: 100, wantQuiet: 25, wantLoaded: 100},
		{name: "GOGC=200", gogc: 200, wantQuiet: 25, wantLoaded: 200},
		{name: "GOGC=off", gogc: -1, wantQuiet: -1, wantLoaded: -1},
		{name: "GOGC lower than the quiet one", gogc: 10, wantQuiet: 10, wantLoaded: 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var s Sample
				set := func(v Sample) {
					mu.Lock()
					defer mu.Unlock()
					s = v
				}
				read := func() Sample {
					mu.Lock()
					defer mu.Unlock()
					return s
				}
				gc := &gcPercent{percent: tc.gogc}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					run(ctx, testPolicy, read, func() {}, gc.set)
					close(done)
				}()
				synctest.Wait()
				// An interval of load, then a quiet one: the release.
				set(Sample{Allocated: 500 * mib, Excess: 300 * mib})
				time.Sleep(2*testPolicy.Interval + time.Millisecond)
				synctest.Wait()
				if got := gc.get(); got != tc.wantQuiet {
					t.Fatalf("GOGC after the release: got %d, want %d", got, tc.wantQuiet)
				}
				// Idle allocation keeps it.
				set(Sample{Allocated: 501 * mib, Excess: 20 * mib})
				time.Sleep(3 * testPolicy.Interval)
				synctest.Wait()
				if got := gc.get(); got != tc.wantQuiet {
					t.Fatalf("GOGC while quiet: got %d, want %d", got, tc.wantQuiet)
				}
				// Load again: back within a Watch.
				set(Sample{Allocated: 600 * mib, Excess: 20 * mib})
				time.Sleep(testPolicy.Watch)
				synctest.Wait()
				if got := gc.get(); got != tc.wantLoaded {
					t.Errorf("GOGC a second into new load: got %d, want %d", got, tc.wantLoaded)
				}
				cancel()
				<-done
				if got := gc.get(); got != tc.wantLoaded {
					t.Errorf("GOGC after Run: got %d, want %d", got, tc.wantLoaded)
				}
			})
		})
	}
}

func TestReadSeesTheHeap(t *testing.T) {
	keep := make([]byte, 8*mib)
	s := read()
	if s.Allocated < uint64(len(keep)) {
		t.Errorf("Allocated = %d after allocating %d", s.Allocated, len(keep))
	}
	_ = keep[0]
}
