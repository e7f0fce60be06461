package embeddedetcd

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// scriptedKV answers each Put with the next step of a script.
type scriptedKV struct {
	clientv3.KV
	steps []func(ctx context.Context) error
	calls int
}

func (k *scriptedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	step := k.steps[min(k.calls, len(k.steps)-1)]
	k.calls++
	if err := step(ctx); err != nil {
		return nil, err
	}
	return &clientv3.PutResponse{}, nil
}

// leaders is a leader-change notifier as etcd's: Receive's channel closes
// at the next change.
type leaders struct {
	mu sync.Mutex
	ch chan struct{}
}

func newLeaders() *leaders { return &leaders{ch: make(chan struct{})} }

func (l *leaders) receive() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ch
}

func (l *leaders) change() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.ch)
	l.ch = make(chan struct{})
}

var errDropped = status.Error(codes.Unknown, "raft proposal dropped")

// waitForCancel is a proposal lost with its leader: etcd answers only when
// the request's context ends.
func waitForCancel(ctx context.Context) error {
	<-ctx.Done()
	return rpctypes.ErrGRPCCanceled
}

func succeed(context.Context) error { return nil }

func TestLeaderAwareWrite(t *testing.T) {
	tests := []struct {
		name string
		// steps script the member's answers; during runs while the
		// first is in flight.
		steps     []func(context.Context) error
		during    func(l *leaders, cancel context.CancelFunc)
		wantErr   error
		wantCalls int
	}{{
		name:      "answered",
		steps:     []func(context.Context) error{succeed},
		wantCalls: 1,
	}, {
		name:      "a new leader while the write waits ends it as of unknown outcome",
		steps:     []func(context.Context) error{waitForCancel},
		during:    func(l *leaders, _ context.CancelFunc) { l.change() },
		wantErr:   ErrLeaderChanged,
		wantCalls: 1,
	}, {
		name:      "dropped for want of a leader is sent again once there is one",
		steps:     []func(context.Context) error{func(context.Context) error { return errDropped }, succeed},
		during:    func(l *leaders, _ context.CancelFunc) { l.change() },
		wantCalls: 2,
	}, {
		name: "dropped as the leader changes is sent again, not of unknown outcome",
		steps: []func(context.Context) error{func(ctx context.Context) error {
			<-ctx.Done()
			return errDropped
		}, succeed},
		during:    func(l *leaders, _ context.CancelFunc) { l.change() },
		wantCalls: 2,
	}, {
		name:      "dropped and no leader announced is sent again after a while",
		steps:     []func(context.Context) error{func(context.Context) error { return errDropped }, succeed},
		wantCalls: 2,
	}, {
		name:      "dropped for longer than etcd waits: no leader",
		steps:     []func(context.Context) error{func(context.Context) error { return errDropped }},
		wantErr:   rpctypes.ErrNoLeader,
		wantCalls: int(droppedRetryFor/droppedRetryEvery) + 1,
	}, {
		name:      "the caller giving up is not a leader change",
		steps:     []func(context.Context) error{waitForCancel},
		during:    func(_ *leaders, cancel context.CancelFunc) { cancel() },
		wantErr:   rpctypes.ErrGRPCCanceled,
		wantCalls: 1,
	}, {
		name:      "other errors are the caller's",
		steps:     []func(context.Context) error{func(context.Context) error { return rpctypes.ErrRequestTooLarge }},
		wantErr:   rpctypes.ErrRequestTooLarge,
		wantCalls: 1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLeaders()
				fake := &scriptedKV{steps: tc.steps}
				kv := &leaderAwareKV{KV: fake, changed: l.receive}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := kv.Put(ctx, "k", "v")
					done <- err
				}()
				synctest.Wait()
				if tc.during != nil {
					tc.during(l, cancel)
				}
				err := <-done
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Errorf("got error %v, want %v", err, tc.wantErr)
				}
				if fake.calls != tc.wantCalls {
					t.Errorf("got %d attempts, want %d", fake.calls, tc.wantCalls)
				}
			})
		})
	}
}

// TestLeaderChangedIsATimeout pins that callers which tell etcd's timeouts
// apart (the allocation's 504) count a write ended by a leader change as
// one.
func TestLeaderChangedIsATimeout(t *testing.T) {
	if !errors.Is(ErrLeaderChanged, rpctypes.ErrTimeoutDueToLeaderFail) {
		t.Errorf("got %v, want an rpctypes.ErrTimeoutDueToLeaderFail", ErrLeaderChanged)
	}
}
