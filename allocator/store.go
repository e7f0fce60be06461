package allocator

import (
	"context"
	"sync"
)

// Store is the durable record of reservations, shared by every API server.
type Store interface {
	// Reserve records every key as held by owner, atomically: either all
	// are recorded, or none is and the keys already held are returned.
	Reserve(ctx context.Context, keys []Key, owner string) (taken []Key, err error)
	// Release removes the keys that owner holds; others are left alone.
	Release(ctx context.Context, keys []Key, owner string) error
	// List returns every reservation and its owner, and a revision to
	// watch from.
	List(ctx context.Context) (map[Key]string, int64, error)
	// Watch reports changes after rev until ctx ends or the watch fails.
	Watch(ctx context.Context, rev int64, fn func(k Key, owner string, deleted bool)) error
}

// MemoryStore is a Store in memory, for tests and for a single process that
// needs no durability.
type MemoryStore struct {
	mu       sync.Mutex
	owners   map[Key]string
	rev      int64
	watchers []func(Key, string, bool)
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{owners: map[Key]string{}} }

// Reserve implements Store.
func (m *MemoryStore) Reserve(ctx context.Context, keys []Key, owner string) ([]Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var taken []Key
	for _, k := range keys {
		if _, ok := m.owners[k]; ok {
			taken = append(taken, k)
		}
	}
	if len(taken) > 0 {
		return taken, nil
	}
	for _, k := range keys {
		m.owners[k] = owner
		m.notifyLocked(k, owner, false)
	}
	return nil, nil
}

// Release implements Store.
func (m *MemoryStore) Release(ctx context.Context, keys []Key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		if m.owners[k] == owner {
			delete(m.owners, k)
			m.notifyLocked(k, owner, true)
		}
	}
	return nil
}

// List implements Store.
func (m *MemoryStore) List(ctx context.Context) (map[Key]string, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[Key]string, len(m.owners))
	for k, v := range m.owners {
		out[k] = v
	}
	return out, m.rev, nil
}

// Watch implements Store; events are delivered synchronously.
func (m *MemoryStore) Watch(ctx context.Context, rev int64, fn func(Key, string, bool)) error {
	m.mu.Lock()
	m.watchers = append(m.watchers, fn)
	m.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (m *MemoryStore) notifyLocked(k Key, owner string, deleted bool) {
	m.rev++
	for _, fn := range m.watchers {
		fn(k, owner, deleted)
	}
}
