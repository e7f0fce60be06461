// Package gcfloor keeps the garbage collector's heap goal from falling
// below a floor while the live heap is small.
//
// Go collects garbage when the heap has grown by GOGC percent of what the
// last collection found live. Each collection marks the whole live heap,
// so the collector's CPU per byte allocated is about the same for a large
// heap as for a small one: a small heap is marked more often. A proxy
// whose live heap is a few MiB and that allocates a few KiB per request
// then spends a real share of its CPU marking the same few MiB over and
// over, dozens of times a second. A floor under the heap goal makes those
// collections rarer, for memory the process was allowed anyway: once the
// live heap is large enough that GOGC's own goal is above the floor, the
// floor does nothing and the process collects as GOGC says.
//
// After each collection, Start's hook sets GOGC to the percentage that
// puts the next goal at the floor, never below the base percentage. It
// owns the GOGC setting of the process while it runs and nothing else;
// GOMEMLIMIT still bounds the heap.
package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the GOGC the floor sets, so that a process whose live
// heap is nearly empty (as at its start) still collects.
const maxPercent = 10000

// Percent is the GOGC that puts the heap goal at floor after a collection
// that found live bytes of heap and scanned stack and globals bytes more;
// never less than base, nor more than maxPercent.
func Percent(floor, live, stack, globals uint64, base int) int {
	scanned := live + stack + globals
	if floor <= live || scanned == 0 {
		return base
	}
	p := math.Ceil(100 * float64(floor-live) / float64(scanned))
	return int(min(max(p, float64(base)), maxPercent))
}

// floor is the hook's state.
type floor struct {
	bytes uint64
	base  int
	// samples are the runtime's figures the next goal is computed from:
	// the goal is the live heap plus GOGC percent of what a collection
	// scans, the live heap, the goroutines' stacks and the globals.
	samples [3]metrics.Sample

	mu      sync.Mutex
	stopped bool
	// set is the percentage last set.
	set int
}

// cycle is an object made for each collection's hook, which a cleanup
// follows: the next collection finds it unreachable and runs the hook.
// It holds a pointer so that the runtime gives it a block of its own (a
// cleanup on a tiny, pointer-free object may never run).
type cycle struct{ _ *floor }

// Start keeps the heap goal at least floor bytes until stop is called,
// GOGC being base otherwise; stop sets GOGC back to base. The goal is set
// at once from the last collection's figures, and again after each
// collection.
func Start(floorBytes uint64, base int) (stop func()) {
	f := &floor{bytes: floorBytes, base: base, set: base, samples: [...]metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	debug.SetGCPercent(base)
	f.collected()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stopped = true
		debug.SetGCPercent(base)
	}
}

// arm runs f.collected after the next collection.
func (f *floor) arm() {
	runtime.AddCleanup(&cycle{}, func(f *floor) { f.collected() }, f)
}

// collected sets GOGC for the goal after a collection, and arms the hook
// for the next one.
func (f *floor) collected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	s := f.samples[:]
	metrics.Read(s)
	p := Percent(f.bytes, value(s[0]), value(s[1]), value(s[2]), f.base)
	// A live heap that barely moves between collections leaves GOGC as it
	// is: setting it takes the heap's lock.
	if p != f.set && (p == f.base || math.Abs(float64(p-f.set)) > float64(f.set)/16) {
		debug.SetGCPercent(p)
		f.set = p
	}
	f.arm()
}

func value(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}
