package mirroring

import (
	"sync"
	"time"
)

// creationTimeout bounds how long a created slice may stay invisible to
// the informer before the controller stops waiting for it (a watch that
// relisted past a create-then-delete never shows the slice at all).
const creationTimeout = 30 * time.Second

// creations remembers the slices this controller created that its
// informer has not shown yet. Slices are created with generated names, so
// syncing from a cache that lacks one would create its twin; while a
// creation is unseen the controller waits instead. Updates and deletes
// need no such care: updates carry a resourceVersion and conflict when
// stale, and deleting twice is harmless.
type creations struct {
	mu      sync.Mutex
	pending map[string]map[string]time.Time // endpoints key -> slice name -> created at
}

// expect records that slice name was created for key at time at.
func (c *creations) expect(key, name string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[string]map[string]time.Time{}
	}
	if c.pending[key] == nil {
		c.pending[key] = map[string]time.Time{}
	}
	c.pending[key][name] = at
}

// observe records that the informer has shown (or deleted) slice name.
func (c *creations) observe(key, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending[key], name)
	if len(c.pending[key]) == 0 {
		delete(c.pending, key)
	}
}

// unseen reports whether a slice created for key is still missing from
// the cached slices named in cached; creations found there, or older than
// creationTimeout, are forgotten.
func (c *creations) unseen(key string, cached []string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[key]
	for _, name := range cached {
		delete(p, name)
	}
	for name, at := range p {
		if now.Sub(at) > creationTimeout {
			delete(p, name)
		}
	}
	if len(p) == 0 {
		delete(c.pending, key)
		return false
	}
	return true
}

// forget drops everything recorded for key.
func (c *creations) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, key)
}
