// Package etcdretry makes the API server's conditional writes to etcd
// survive the loss of the etcd leader. A write in flight when the leader
// dies ends with an error that leaves its outcome unknown (see
// embeddedetcd.ErrLeaderChanged): its proposal may have been lost with the
// leader, or committed by the new one. Every write the API server's
// storage makes compares the key's mod revision, so sending it again is
// safe: if the first attempt was lost, the second applies; if it landed,
// the second fails its compare, and the key then holds exactly the bytes
// this write put there, which acknowledges it with that revision.
// Nothing is acknowledged that did not land, and nothing that landed is
// reported as failed: when the key shows neither (another writer changed
// it since), the write fails with the first error, whose outcome is
// unknown, as before.
//
// The package owns only that decision; it does not touch what the storage
// writes or how it reads.
package etcdretry

import (
	"bytes"
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"k8s.io/klog/v2"
)

// maxAttempts bounds the attempts of one write: each retry follows a new
// leader, and three leader changes during one request is a cluster that
// should answer with an error.
const maxAttempts = 3

// Client is etcd's Kubernetes interface with OptimisticPut and
// OptimisticDelete sent again when their outcome is unknown.
type Client struct {
	kubernetes.Interface
}

// unknownOutcome says a write ended without saying whether it was applied:
// etcd's timeout after a leader loss, or the in-process client's end of a
// write at a leader change, which is one.
func unknownOutcome(err error) bool {
	return errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail)
}

// OptimisticPut implements kubernetes.Interface.
func (c Client) OptimisticPut(ctx context.Context, key string, value []byte, expectedRevision int64, opts kubernetes.PutOptions) (kubernetes.PutResponse, error) {
	resp, err := c.Interface.OptimisticPut(ctx, key, value, expectedRevision, opts)
	if !unknownOutcome(err) {
		return resp, err
	}
	first := err
	for attempt := 2; attempt <= maxAttempts && ctx.Err() == nil; attempt++ {
		retry := opts
		retry.GetOnFailure = true
		resp, err = c.Interface.OptimisticPut(ctx, key, value, expectedRevision, retry)
		if unknownOutcome(err) {
			continue
		}
		if err != nil {
			// The retry failed for sure; the first attempt may still
			// have landed.
			return kubernetes.PutResponse{}, first
		}
		if resp.Succeeded {
			return resp, nil
		}
		if rev, ok := c.landed(ctx, key, value, expectedRevision, opts.LeaseID, resp); ok {
			klog.V(2).InfoS("Write of unknown outcome had landed", "key", key, "revision", rev)
			return kubernetes.PutResponse{Succeeded: true, Revision: rev}, nil
		}
		return kubernetes.PutResponse{}, first
	}
	return kubernetes.PutResponse{}, first
}

// landed says whether an earlier attempt of a put whose retry failed its
// compare (resp, with the key as it is now) had been applied, and at which
// revision: the key holds its bytes (and lease) now, or, for a create, held
// them when it was created and has been updated since.
func (c Client) landed(ctx context.Context, key string, value []byte, expectedRevision int64, lease clientv3.LeaseID, resp kubernetes.PutResponse) (int64, bool) {
	kv := resp.KV
	if kv == nil {
		return 0, false // deleted since: whoever wrote it, nothing to acknowledge
	}
	if bytes.Equal(kv.Value, value) && kv.Lease == int64(lease) {
		return kv.ModRevision, true
	}
	if expectedRevision != 0 || kv.CreateRevision == kv.ModRevision {
		return 0, false
	}
	created, err := c.Interface.Get(ctx, key, kubernetes.GetOptions{Revision: kv.CreateRevision})
	if err != nil || created.KV == nil || created.KV.ModRevision != kv.CreateRevision {
		return 0, false
	}
	if bytes.Equal(created.KV.Value, value) && created.KV.Lease == int64(lease) {
		return kv.CreateRevision, true
	}
	return 0, false
}

// OptimisticDelete implements kubernetes.Interface. A retry that finds the
// key gone cannot tell this delete from another, so it fails with the first
// error: the caller must not give back what the object held on the word of
// another server's delete.
func (c Client) OptimisticDelete(ctx context.Context, key string, expectedRevision int64, opts kubernetes.DeleteOptions) (kubernetes.DeleteResponse, error) {
	resp, err := c.Interface.OptimisticDelete(ctx, key, expectedRevision, opts)
	if !unknownOutcome(err) {
		return resp, err
	}
	first := err
	for attempt := 2; attempt <= maxAttempts && ctx.Err() == nil; attempt++ {
		retry := opts
		retry.GetOnFailure = true
		resp, err = c.Interface.OptimisticDelete(ctx, key, expectedRevision, retry)
		if unknownOutcome(err) {
			continue
		}
		if err != nil {
			return kubernetes.DeleteResponse{}, first
		}
		if resp.Succeeded {
			return resp, nil
		}
		if resp.KV != nil && resp.KV.CreateRevision <= expectedRevision {
			// The object this delete saw, changed by another writer
			// and never deleted, so this delete was not applied: the
			// compare failure is the caller's answer.
			if !opts.GetOnFailure {
				resp.KV = nil
			}
			return resp, nil
		}
		return kubernetes.DeleteResponse{}, first
	}
	return kubernetes.DeleteResponse{}, first
}
