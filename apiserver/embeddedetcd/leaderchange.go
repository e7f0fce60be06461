package embeddedetcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"
)

// ErrLeaderChanged says a write was given up because this member saw a new
// etcd leader while the write was in flight: it may or may not have been
// applied. It is one of etcd's timeouts "due to leader failure", so that
// callers that tell timeouts apart treat it as one.
var ErrLeaderChanged = fmt.Errorf("%w: the etcd leader changed while the write was in flight, so it may or may not have been applied",
	rpctypes.ErrTimeoutDueToLeaderFail)

// droppedRetryFor bounds how long a write whose proposal raft dropped (no
// leader known yet) is tried again: as long as etcd itself waits for a
// proposal with the default election timeout (its ReqTimeout, 5 s plus two
// election timeouts). Then it fails as etcd's "no leader", unavailable:
// the write was never applied.
const droppedRetryFor = 7 * time.Second

// droppedRetryEvery is how often a dropped write is tried again when no new
// leader is announced meanwhile (raft also drops proposals during a
// leadership transfer, which ends without a new leader).
const droppedRetryEvery = 200 * time.Millisecond

// leaderAwareKV is the in-process client's KV with writes that end as soon
// as the member sees a new leader. A follower forwards a write's proposal to
// the leader; if the leader dies before the entry reaches a majority, the
// proposal is lost, and etcd waits out its whole request timeout (7 s with
// the default election timeout) before answering, although the new leader
// takes writes about a second after the old one died. Ending the write at
// the leader change instead lets the caller retry it against the new
// leader at once; since the old proposal may still be committed, the
// caller gets ErrLeaderChanged, not a failure, and must find out which
// happened (see etcdretry). A write raft dropped before sending it (no
// leader known) was never applied, so it is simply sent again once there
// is one.
type leaderAwareKV struct {
	clientv3.KV
	// changed returns a channel closed at the next leader change
	// (EtcdServer.LeaderChangedNotify).
	changed func() <-chan struct{}
}

// Put implements clientv3.KV.
func (k *leaderAwareKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	var resp *clientv3.PutResponse
	err := k.write(ctx, func(ctx context.Context) (err error) {
		resp, err = k.KV.Put(ctx, key, val, opts...)
		return err
	})
	return resp, err
}

// Delete implements clientv3.KV.
func (k *leaderAwareKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	var resp *clientv3.DeleteResponse
	err := k.write(ctx, func(ctx context.Context) (err error) {
		resp, err = k.KV.Delete(ctx, key, opts...)
		return err
	})
	return resp, err
}

// Do implements clientv3.KV; reads go straight through.
func (k *leaderAwareKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if op.IsGet() {
		return k.KV.Do(ctx, op)
	}
	var resp clientv3.OpResponse
	err := k.write(ctx, func(ctx context.Context) (err error) {
		resp, err = k.KV.Do(ctx, op)
		return err
	})
	return resp, err
}

// Txn implements clientv3.KV.
func (k *leaderAwareKV) Txn(ctx context.Context) clientv3.Txn {
	return &leaderAwareTxn{kv: k, ctx: ctx}
}

// write runs one write, ended with ErrLeaderChanged if the leader changes
// while it waits, and sent again while raft drops it for want of a leader.
func (k *leaderAwareKV) write(ctx context.Context, do func(context.Context) error) error {
	giveUp := time.Now().Add(droppedRetryFor)
	for {
		changed := k.changed()
		attempt, cancel := context.WithCancel(ctx)
		stop := make(chan struct{})
		go func() {
			select {
			case <-changed:
				cancel()
			case <-stop:
			}
		}()
		err := do(attempt)
		close(stop)
		abandoned := attempt.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return err
		case abandoned && !dropped(err):
			return ErrLeaderChanged
		case !dropped(err):
			return err
		case !time.Now().Before(giveUp):
			return fmt.Errorf("%w: %v for %s", rpctypes.ErrNoLeader, err, droppedRetryFor)
		}
		wait := time.NewTimer(droppedRetryEvery)
		select {
		case <-changed:
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return err
		}
		wait.Stop()
	}
}

// dropped says raft refused the proposal without appending or forwarding
// it, so it can never be applied. The error crosses the in-process gRPC
// adapter as an unknown status with raft's message.
func dropped(err error) bool {
	if errors.Is(err, rpctypes.ErrNoLeader) {
		return true
	}
	s, ok := status.FromError(err)
	return ok && strings.Contains(s.Message(), "raft proposal dropped")
}

// leaderAwareTxn collects a transaction and commits it as a leaderAwareKV
// write.
type leaderAwareTxn struct {
	kv               *leaderAwareKV
	ctx              context.Context
	cmps             []clientv3.Cmp
	thenOps, elseOps []clientv3.Op
}

// If implements clientv3.Txn.
func (t *leaderAwareTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.cmps = append(t.cmps, cs...)
	return t
}

// Then implements clientv3.Txn.
func (t *leaderAwareTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.thenOps = append(t.thenOps, ops...)
	return t
}

// Else implements clientv3.Txn.
func (t *leaderAwareTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.elseOps = append(t.elseOps, ops...)
	return t
}

// Commit implements clientv3.Txn; a transaction that only reads goes
// straight through, as etcd serves it without raft.
func (t *leaderAwareTxn) Commit() (*clientv3.TxnResponse, error) {
	commit := func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return t.kv.KV.Txn(ctx).If(t.cmps...).Then(t.thenOps...).Else(t.elseOps...).Commit()
	}
	if readOnly(t.thenOps) && readOnly(t.elseOps) {
		return commit(t.ctx)
	}
	var resp *clientv3.TxnResponse
	err := t.kv.write(t.ctx, func(ctx context.Context) (err error) {
		resp, err = commit(ctx)
		return err
	})
	return resp, err
}

func readOnly(ops []clientv3.Op) bool {
	for _, op := range ops {
		if !op.IsGet() {
			return false
		}
	}
	return true
}
