// Package snapshotwindow bounds how long the watch cache keeps the
// snapshots of its store that serve lists at past resource versions.
//
// With ListFromCacheSnapshot (on by default since Kubernetes 1.34) the
// watch cache clones its store after every event, so that a list at an
// exact resource version, or the next page of a paginated list, is served
// from memory. A clone is cheap, but the next write to the store copies
// the nodes on its path, and the clone keeps the old ones: about 1 KiB
// per event. The cacher drops the snapshots only when its event history is
// full, which takes new events, or when etcd is compacted, which it learns
// by polling its storage's CompactRevision every 15 s. So after a burst of
// writes to a resource that then goes quiet, every snapshot of the burst
// stays until the next compaction, five minutes later in Portal, which for
// ten thousand creates is as much memory as the objects themselves.
//
// A Compactor is what the storage reports as its compaction: the later of
// etcd's compaction and the revision etcd was at a window ago. Snapshots
// are then kept for the window, as long as the watch cache promises to
// keep its event history, and the cacher drops older ones within 15 s. A
// list at a version older than what is kept is served by etcd, exactly as
// after a compaction of the cache's snapshots and as before snapshots
// existed: the storage itself is not compacted, and the watch cache's
// event history, which serves watches, is untouched.
//
// This package owns that revision and nothing else.
package snapshotwindow

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Compactor is an etcd3.Compactor whose revision is at least the one etcd
// was at Window ago. Its zero value is not usable; see New.
type Compactor struct {
	// etcd is the compactor of etcd itself; nil when etcd is not
	// compacted.
	etcd interface{ CompactRevision() int64 }
	// window is how long snapshots are kept.
	window time.Duration

	mu sync.Mutex
	// samples are etcd's revisions at known times, oldest first: the
	// newest one at least window old, and those after it.
	samples []sample
}

type sample struct {
	at  time.Time
	rev int64
}

// New returns a Compactor that keeps snapshots for window, or until etcd's
// compaction (etcd, nil for none) if that comes first.
func New(etcd interface{ CompactRevision() int64 }, window time.Duration) *Compactor {
	return &Compactor{etcd: etcd, window: window}
}

// CompactRevision is the revision below which snapshots are to be dropped:
// the later of etcd's compaction and the revision etcd was at a window
// ago, or 0 when neither is known.
func (c *Compactor) CompactRevision() int64 {
	return c.compactRevision(time.Now())
}

func (c *Compactor) compactRevision(now time.Time) int64 {
	var rev int64
	if c.etcd != nil {
		rev = c.etcd.CompactRevision()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := now.Add(-c.window)
	for _, s := range c.samples {
		if s.at.After(cut) {
			break
		}
		rev = max(rev, s.rev)
	}
	return rev
}

// Observe records that etcd was at rev at time at. Samples must come in
// the order of their times.
func (c *Compactor) Observe(at time.Time, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, sample{at: at, rev: rev})
	// Only the newest sample at least a window old can still matter.
	cut, keep := at.Add(-c.window), 0
	for i, s := range c.samples {
		if !s.at.After(cut) {
			keep = i
		}
	}
	if keep > 0 {
		c.samples = append(c.samples[:0], c.samples[keep:]...)
	}
}

// Run observes etcd's revision, as current returns it, every interval
// until ctx ends. A failed read is skipped: the window then lasts one
// sample longer.
func (c *Compactor) Run(ctx context.Context, interval time.Duration, current func(context.Context) (int64, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, interval)
		rev, err := current(rctx)
		cancel()
		switch {
		case err == nil:
			c.Observe(time.Now(), rev)
		case ctx.Err() == nil:
			klog.V(2).InfoS("Could not read etcd's revision for the watch cache's snapshots", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
