package allocator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errRaced says a reservation failed on keys that were gone by the time
// the transaction looked at them; trying again can succeed.
var errRaced = errors.New("reservation raced with a release")

// EtcdStore keeps reservations as keys under a prefix in etcd, one key per
// address or port, whose value names the owning Service. Create-if-absent
// transactions make a reservation exclusive across API servers.
type EtcdStore struct {
	client *clientv3.Client
	prefix string
}

// NewEtcdStore returns a store under prefix (e.g. "/registry/portal.dev/allocations/").
func NewEtcdStore(client *clientv3.Client, prefix string) *EtcdStore {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &EtcdStore{client: client, prefix: prefix}
}

// Reserve implements Store in one transaction.
func (s *EtcdStore) Reserve(ctx context.Context, keys []Key, owner string) ([]Key, error) {
	if len(keys) == 0 {
		return nil, nil
	}
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
