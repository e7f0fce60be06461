package etcdretry

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/v3/kubernetes"

	"portal.dev/portal/apiserver/embeddedetcd"
)

// fault is what becomes of one attempt of a write.
type fault int

const (
	pass    fault = iota // applied and answered
	landed               // applied, answer lost with the leader
	lost                 // never applied, answer lost with the leader
	refused              // never applied, refused for sure (no leader)
)

// faulty is a real etcd whose writes meet faults in turn, and whose
// between runs before every retry: another writer's turn.
type faulty struct {
	kubernetes.Interface
	faults  []fault
	between func()
	calls   int
}

var errUnknown = embeddedetcd.ErrLeaderChanged

func (f *faulty) next() fault {
	if f.calls > 0 && f.between != nil {
		f.between()
	}
	fl := pass
	if f.calls < len(f.faults) {
		fl = f.faults[f.calls]
	}
	f.calls++
	return fl
}

func (f *faulty) OptimisticPut(ctx context.Context, key string, value []byte, rev int64, opts kubernetes.PutOptions) (kubernetes.PutResponse, error) {
	fl := f.next()
	switch fl {
	case lost:
		return kubernetes.PutResponse{}, errUnknown
	case refused:
		return kubernetes.PutResponse{}, rpctypes.ErrNoLeader
	}
	resp, err := f.Interface.OptimisticPut(ctx, key, value, rev, opts)
	if fl == landed && err == nil {
		return kubernetes.PutResponse{}, errUnknown
	}
	return resp, err
}

func (f *faulty) OptimisticDelete(ctx context.Context, key string, rev int64, opts kubernetes.DeleteOptions) (kubernetes.DeleteResponse, error) {
	fl := f.next()
	switch fl {
	case lost:
		return kubernetes.DeleteResponse{}, errUnknown
	case refused:
		return kubernetes.DeleteResponse{}, rpctypes.ErrNoLeader
	}
	resp, err := f.Interface.OptimisticDelete(ctx, key, rev, opts)
	if fl == landed && err == nil {
		return kubernetes.DeleteResponse{}, errUnknown
	}
	return resp, err
}

func startEtcd(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv, err := embeddedetcd.Start(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := srv.InProcessClient()
	t.Cleanup(func() { c.Close() })
	kc := &kubernetes.Client{Client: c}
	kc.Kubernetes = kc
	return kc
}

// put writes value to key unconditionally, as another server would.
func put(t *testing.T, kc kubernetes.Interface, key, value string) {
	t.Helper()
	cur, err := kc.Get(t.Context(), key, kubernetes.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rev int64
	if cur.KV != nil {
		rev = cur.KV.ModRevision
	}
	if resp, err := kc.OptimisticPut(t.Context(), key, []byte(value), rev, kubernetes.PutOptions{}); err != nil || !resp.Succeeded {
		t.Fatalf("another writer's put of %s: %v, succeeded %v", key, err, resp.Succeeded)
	}
}

func TestOptimisticPutOfUnknownOutcome(t *testing.T) {
	tests := []struct {
		name   string
		exists bool // the key holds "old" before the write (an update)
		faults []fault
		// other is another writer's value, put before the retry.
		other string
		// want is the answer: an acknowledged write, or the unknown
		// outcome's error; stored is the key's value after.
		want   string
		stored string
	}{
		{name: "create lost, retried", faults: []fault{lost}, want: "ack", stored: "mine"},
		{name: "create landed, acknowledged", faults: []fault{landed}, want: "ack", stored: "mine"},
		{name: "create landed and updated since, acknowledged", faults: []fault{landed}, other: "theirs", want: "ack", stored: "theirs"},
		{name: "create lost and another created it: unknown", faults: []fault{lost}, other: "theirs", want: "unknown", stored: "theirs"},
		{name: "update lost, retried", exists: true, faults: []fault{lost}, want: "ack", stored: "mine"},
		{name: "update landed, acknowledged", exists: true, faults: []fault{landed}, want: "ack", stored: "mine"},
		{name: "update landed and updated since: unknown", exists: true, faults: []fault{landed}, other: "theirs", want: "unknown", stored: "theirs"},
		{name: "lost at every leader: unknown", faults: []fault{lost, lost, lost}, want: "unknown"},
		{name: "lost, then landed: acknowledged", faults: []fault{lost, landed}, want: "ack", stored: "mine"},
		// The retry's refusal says nothing of the first attempt.
		{name: "landed, then the retry refused: unknown", faults: []fault{landed, refused}, want: "unknown", stored: "mine"},
	}
	kc := startEtcd(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "/registry/test/" + string(rune('a'+i))
			var rev int64
			if tc.exists {
				put(t, kc, key, "old")
				cur, _ := kc.Get(t.Context(), key, kubernetes.GetOptions{})
				rev = cur.KV.ModRevision
			}
			f := &faulty{Interface: kc, faults: tc.faults}
			if tc.other != "" {
				f.between = func() {
					put(t, kc, key, tc.other)
					f.between = nil
				}
			}
			resp, err := Client{f}.OptimisticPut(t.Context(), key, []byte("mine"), rev, kubernetes.PutOptions{})
			got := "ack"
			switch {
			case errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail):
				got = "unknown"
			case err != nil:
				got = err.Error()
			case !resp.Succeeded:
				got = "compare failed"
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			cur, err := kc.Get(t.Context(), key, kubernetes.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var stored string
			if cur.KV != nil {
				stored = string(cur.KV.Value)
			}
			if stored != tc.stored {
				t.Errorf("got %q stored, want %q", stored, tc.stored)
			}
			if got != "ack" {
				return
			}
			// The acknowledged revision is the one this write made.
			at, err := kc.Get(t.Context(), key, kubernetes.GetOptions{Revision: resp.Revision})
			if err != nil {
				t.Fatal(err)
			}
			if at.KV == nil || string(at.KV.Value) != "mine" || at.KV.ModRevision != resp.Revision {
				t.Errorf("got revision %d holding %v, want the revision of this write", resp.Revision, at.KV)
			}
		})
	}
}

func TestOptimisticDeleteOfUnknownOutcome(t *testing.T) {
	tests := []struct {
		name   string
		faults []fault
		other  string
		want   string
		gone   bool
	}{
		{name: "lost, retried", faults: []fault{lost}, want: "ack", gone: true},
		// Another server's delete would look the same.
		{name: "landed: unknown", faults: []fault{landed}, want: "unknown", gone: true},
		{name: "lost and updated since: compare failed", faults: []fault{lost}, other: "theirs", want: "compare failed"},
		{name: "lost at every leader: unknown", faults: []fault{lost, lost, lost}, want: "unknown"},
		{name: "landed, then the retry refused: unknown", faults: []fault{landed, refused}, want: "unknown", gone: true},
	}
	kc := startEtcd(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "/registry/delete/" + string(rune('a'+i))
			put(t, kc, key, "old")
			cur, _ := kc.Get(t.Context(), key, kubernetes.GetOptions{})
			f := &faulty{Interface: kc, faults: tc.faults}
			if tc.other != "" {
				f.between = func() {
					put(t, kc, key, tc.other)
					f.between = nil
				}
			}
			resp, err := Client{f}.OptimisticDelete(t.Context(), key, cur.KV.ModRevision, kubernetes.DeleteOptions{GetOnFailure: true})
			got := "ack"
			switch {
			case errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail):
				got = "unknown"
			case err != nil:
				got = err.Error()
			case !resp.Succeeded:
				got = "compare failed"
			}
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			after, err := kc.Get(t.Context(), key, kubernetes.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if gone := after.KV == nil; gone != tc.gone {
				t.Errorf("got key gone %v, want %v", gone, tc.gone)
			}
		})
	}
}
