// Package memrelease gives back to the operating system the memory a burst
// of work left behind, once the process is quiet again.
//
// Go collects garbage when the heap reaches twice what was live after the
// last collection, and an idle process allocates so little that the next
// collection may be minutes away (the runtime forces one every two
// minutes). Until then the garbage of the burst stays in the heap, and
// after it the runtime's scavenger keeps freed pages up to the heap goal,
// which the burst raised. So an API server that served a minute of heavy
// load sits idle at about twice its pre-load size, memory no one uses that
// the next burst would reuse but that the machine's other processes cannot
// have meanwhile. A memory limit (GOMEMLIMIT) would not help: it makes the
// collector work harder near the limit during load, and does nothing for an
// idle process below it.
//
// Run watches the allocation rate. After an interval of load followed by a
// quiet one, if the heap holds much more than its live data, it collects and
// returns the free pages at once (debug.FreeOSMemory): two collections of
// a quiet process. While the process stays quiet after that, the little it
// allocates grows the heap again towards the goal the burst left, and the
// runtime keeps the pages its next collection frees; so it releases again
// when the excess has grown by AgainExcess over what the last release
// left, at most every Again intervals. Without that an idle server's RSS
// climbs back by a few tens of MiB between releases, and what it shows at
// a given moment depends on where in that climb it is. What a release leaves is mostly free space inside
// spans still in use, which no release returns. A process that never had
// a burst is left to the runtime. It owns nothing but that decision; what
// else to give back at a release is its caller's (Run's also).
package memrelease

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"
)

// Sample is the heap's state at one moment.
type Sample struct {
	// Allocated is the bytes allocated since the process started.
	Allocated uint64
	// Excess is the heap memory the process holds from the system beyond
	// its live data: garbage not yet collected, and free pages not yet
	// returned.
	Excess uint64
}

// Policy says when a release is worth a collection.
type Policy struct {
	// Interval is how often the heap is sampled.
	Interval time.Duration
	// BusyRate is the allocation rate, bytes per second over an interval,
	// from which the process counts as under load.
	BusyRate float64
	// QuietRate is the rate below which it counts as quiet again.
	QuietRate float64
	// MinExcess is the least excess worth a release after load.
	MinExcess uint64
	// AgainExcess is how much the excess must have grown over what the
	// last release left for another release without new load.
	AgainExcess uint64
	// Again is how many quiet intervals after a release must pass before
	// another one without new load.
	Again int
}

// DefaultPolicy samples every 15 s, so a release comes 15-30 s after the
// load ends. An idle `portal server` allocates well under 1 MiB/s (leases,
// bookmarks, controller resyncs, metrics scrapes); a load that leaves
// memory behind, tens of MiB/s. While it stays quiet after a load, a
// release every 30-60 s keeps the garbage it allocates to about 16 MiB;
// each costs two collections of a heap of live data, a fraction of a
// percent of a core.
var DefaultPolicy = Policy{
	Interval:    15 * time.Second,
	BusyRate:    8 << 20,
	QuietRate:   2 << 20,
	MinExcess:   32 << 20,
	AgainExcess: 16 << 20,
	Again:       2,
}

// decider is the policy's state between samples.
type decider struct {
	policy Policy
	prev   Sample
	primed bool
	// busy is whether an interval of load came since the last release or
	// quiet interval.
	busy bool
	// released is whether a burst was followed by a release; since counts
	// the intervals after the last one.
	released bool
	since    int
	// base is the excess just after the last release: what a release
	// could not return (free space inside in-use spans), which another
	// release would not return either.
	base uint64
}

// observe takes the sample at the end of an interval and says whether to
// release now.
func (d *decider) observe(s Sample) bool {
	prev, primed := d.prev, d.primed
	d.prev, d.primed = s, true
	if !primed || s.Allocated < prev.Allocated {
		return false
	}
	rate := float64(s.Allocated-prev.Allocated) / d.policy.Interval.Seconds()
	d.since++
	switch {
	case rate >= d.policy.BusyRate:
		d.busy = true
		return false
	case rate >= d.policy.QuietRate:
		return false
	case d.busy && s.Excess < d.policy.MinExcess:
		// Quiet without much excess ends the burst.
		d.busy = false
		return false
	case !d.busy && !(d.released && d.since >= d.policy.Again && s.Excess >= d.base+d.policy.AgainExcess):
		return false
	}
	d.busy, d.released, d.since = false, true, 0
	return true
}

// releasedTo records the excess just after a release.
func (d *decider) releasedTo(excess uint64) { d.base = excess }

// Run releases memory as the policy says until ctx ends, and calls each
// of also after each release, for memory outside the Go heap a quiet
// process can give back too.
func Run(ctx context.Context, p Policy, also ...func()) {
	run(ctx, p, read, func() {
		release()
		for _, f := range also {
			f()
		}
	})
}

// release collects twice and returns the free pages. A burst fills the
// sync.Pools (buffers, gzip writers, encoders), and a collection only
// moves what they hold aside, freeing it at the next one; so does an
// object with a finalizer. With one collection that memory stayed until the
// following release, a minute or more later.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

func run(ctx context.Context, p Policy, read func() Sample, release func()) {
	d := &decider{policy: p}
	d.observe(read())
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := read()
		if !d.observe(s) {
			continue
		}
		start := time.Now()
		release()
		after := read().Excess
		d.releasedTo(after)
		klog.V(2).InfoS("Returned memory to the system after load", "excessMiB", s.Excess>>20, "leftMiB", after>>20, "took", time.Since(start))
	}
}

// The runtime/metrics this package reads.
const (
	allocs  = "/gc/heap/allocs:bytes"
	live    = "/gc/heap/live:bytes"
	objects = "/memory/classes/heap/objects:bytes"
	unused  = "/memory/classes/heap/unused:bytes"
	free    = "/memory/classes/heap/free:bytes"
)

func read() Sample {
	m := []metrics.Sample{{Name: allocs}, {Name: live}, {Name: objects}, {Name: unused}, {Name: free}}
	metrics.Read(m)
	v := func(i int) uint64 {
		if m[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return m[i].Value.Uint64()
	}
	s := Sample{Allocated: v(0)}
	if held := v(2) + v(3) + v(4); held > v(1) {
		s.Excess = held - v(1)
	}
	return s
}
