package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errRaced says a reservation failed on keys that were gone by the time
// the transaction looked at them; trying again can succeed.
var errRaced = errors.New("reservation raced with a release")

// EtcdStore keeps reservations as keys under a prefix in etcd, one key per
// address or port, whose value names the owning Service. Create-if-absent
// transactions make a reservation exclusive across API servers.
//
// Reservations made while another is in flight wait and go together in the
// next transaction, so parallel creates cost one etcd write per batch, not
// one each. A batch that finds any key taken is redone one reservation at a
// time, so each caller still gets its own answer.
type EtcdStore struct {
	client *clientv3.Client
	prefix string

	mu       sync.Mutex
	queue    []*reservation
	flushing bool
}

// reservation is one caller's Reserve waiting for its batch.
type reservation struct {
	keys  []Key
	owner string
	done  chan reserved
}

type reserved struct {
	taken []Key
	err   error
}

// maxBatchKeys keeps a batch's transaction under etcd's default limit of
// 128 operations (--max-txn-ops).
const maxBatchKeys = 100

// batchTimeout bounds one batch's transaction. A caller whose batch has
// started waits for it whatever its own context, so a reservation is never
// stored behind the back of a caller that gave up; one still queued leaves
// the queue when its context ends.
const batchTimeout = 30 * time.Second

// NewEtcdStore returns a store under prefix (e.g. "/registry/portal.dev/allocations/").
func NewEtcdStore(client *clientv3.Client, prefix string) *EtcdStore {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &EtcdStore{client: client, prefix: prefix}
}

// Reserve implements Store: the keys go into the next batch.
func (s *EtcdStore) Reserve(ctx context.Context, keys []Key, owner string) ([]Key, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > maxBatchKeys {
		return s.reserve(ctx, keys, owner)
	}
	r := &reservation{keys: keys, owner: owner, done: make(chan reserved, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, r)
	if !s.flushing {
		s.flushing = true
		go s.flush()
	}
	s.mu.Unlock()
	select {
	case res := <-r.done:
		return res.taken, res.err
	case <-ctx.Done():
		// Still queued: nothing was sent, so it can go. Taken by a
		// batch already: that batch's answer stands.
		s.mu.Lock()
		if i := slices.Index(s.queue, r); i >= 0 {
			s.queue = slices.Delete(s.queue, i, i+1)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Unlock()
		res := <-r.done
		return res.taken, res.err
	}
}

// flush commits the queued reservations batch by batch until none is left.
func (s *EtcdStore) flush() {
	for {
		s.mu.Lock()
		batch, rest := s.nextBatchLocked()
		s.queue = rest
		if len(batch) == 0 {
			s.flushing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.commit(batch)
	}
}

// nextBatchLocked takes reservations from the queue, in order, up to
// maxBatchKeys keys; one that names a key already in the batch waits for
// the next, so each batch's keys are distinct.
func (s *EtcdStore) nextBatchLocked() (batch, rest []*reservation) {
	seen := map[Key]bool{}
	n := 0
	for i, r := range s.queue {
		clash := n+len(r.keys) > maxBatchKeys
		for _, k := range r.keys {
			clash = clash || seen[k]
		}
		if clash {
			if len(batch) == 0 {
				batch = append(batch, r) // a single one always fits
				for _, k := range r.keys {
					seen[k] = true
				}
				n += len(r.keys)
				continue
			}
			rest = append(rest, s.queue[i:]...)
			return batch, rest
		}
		for _, k := range r.keys {
			seen[k] = true
		}
		n += len(r.keys)
		batch = append(batch, r)
	}
	return batch, nil
}

// commit stores a batch in one transaction; if any key is taken, it redoes
// the batch one reservation at a time.
func (s *EtcdStore) commit(batch []*reservation) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	if len(batch) == 1 {
		taken, err := s.reserve(ctx, batch[0].keys, batch[0].owner)
		batch[0].done <- reserved{taken, err}
		return
	}
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	for _, r := range batch {
		for _, k := range r.keys {
			path := s.prefix + string(k)
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(path), "=", 0))
			puts = append(puts, clientv3.OpPut(path, r.owner))
		}
	}
	resp, err := s.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		// The write may still have happened (a timeout after commit):
		// retrying could find the caller's own keys and call them
		// taken. Each caller gets the error, as a lone reservation
		// would, and the repair loop frees whatever was stored.
		for _, r := range batch {
			r.done <- reserved{err: fmt.Errorf("reserve: %w", err)}
		}
		return
	}
	if resp.Succeeded {
		for _, r := range batch {
			r.done <- reserved{}
		}
		return
	}
	// A key was taken: nothing of the batch is stored, so each
	// reservation tries alone and gets its own answer.
	for _, r := range batch {
		taken, err := s.reserve(ctx, r.keys, r.owner)
		r.done <- reserved{taken, err}
	}
}

// reserve records keys for owner in one transaction of their own.
func (s *EtcdStore) reserve(ctx context.Context, keys []Key, owner string) ([]Key, error) {
	cmps := make([]clientv3.Cmp, 0, len(keys))
	puts := make([]clientv3.Op, 0, len(keys))
	gets := make([]clientv3.Op, 0, len(keys))
	for _, k := range keys {
		path := s.prefix + string(k)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(path), "=", 0))
		puts = append(puts, clientv3.OpPut(path, owner))
		gets = append(gets, clientv3.OpGet(path, clientv3.WithKeysOnly()))
	}
	resp, err := s.client.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	if err != nil {
		return nil, fmt.Errorf("reserve %v: %w", keys, err)
	}
	if resp.Succeeded {
		return nil, nil
	}
	var taken []Key
	for i, r := range resp.Responses {
		if len(r.GetResponseRange().Kvs) > 0 {
			taken = append(taken, keys[i])
		}
	}
	if len(taken) == 0 {
		// Released between the compare and the reads: the caller tries
		// again.
		return nil, errRaced
	}
	return taken, nil
}

// Release implements Store: each key goes only if owner still holds it.
func (s *EtcdStore) Release(ctx context.Context, keys []Key, owner string) error {
	for _, k := range keys {
		path := s.prefix + string(k)
		_, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(path), "=", owner)).
			Then(clientv3.OpDelete(path)).Commit()
		if err != nil {
			return fmt.Errorf("release %s: %w", k, err)
		}
	}
	return nil
}

// List implements Store.
func (s *EtcdStore) List(ctx context.Context) (map[Key]string, int64, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	out := make(map[Key]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[Key(strings.TrimPrefix(string(kv.Key), s.prefix))] = string(kv.Value)
	}
	return out, resp.Header.Revision, nil
}

// Watch implements Store.
func (s *EtcdStore) Watch(ctx context.Context, rev int64, fn func(Key, string, bool)) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.client.Watch(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			fn(Key(strings.TrimPrefix(string(ev.Kv.Key), s.prefix)), string(ev.Kv.Value), ev.Type == clientv3.EventTypeDelete)
		}
	}
	return ctx.Err()
}
