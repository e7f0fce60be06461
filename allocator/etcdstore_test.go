package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"portal.dev/portal/apiserver/embeddedetcd"
)

func testEtcdStore(t *testing.T) (*EtcdStore, *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := embeddedetcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	tlsConfig, err := transport.TLSInfo{CertFile: srv.CertFile, KeyFile: srv.KeyFile, TrustedCAFile: srv.CAFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, TLS: tlsConfig,
		DialTimeout: 10 * time.Second, Logger: embeddedetcd.QuietLogger(zapcore.ErrorLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return NewEtcdStore(client, "/registry/test/allocations"), client
}

// TestEtcdStoreParallelReserve checks that reservations made together (and
// so batched) are each exclusive: of many callers wanting overlapping keys,
// each key goes to exactly one, every caller hears whether it got its keys,
// and what etcd holds matches those answers.
func TestEtcdStoreParallelReserve(t *testing.T) {
	store, client := testEtcdStore(t)
	ctx := context.Background()
	if taken, err := store.Reserve(ctx, []Key{portKey(30000)}, "default/first"); err != nil || len(taken) > 0 {
		t.Fatalf("first reservation: taken %v, err %v", taken, err)
	}

	const callers = 64
	type answer struct {
		keys  []Key
		taken []Key
		err   error
	}
	answers := make([]answer, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Pairs of callers want the same port; every eighth also
			// wants the port already held.
			keys := []Key{portKey(31000 + i/2), ipKey(netip.MustParseAddr(fmt.Sprintf("10.96.1.%d", i)))}
			if i%8 == 0 {
				keys = append(keys, portKey(30000))
			}
			taken, err := store.Reserve(ctx, keys, fmt.Sprintf("default/s%d", i))
			answers[i] = answer{keys, taken, err}
		}()
	}
	wg.Wait()

	owners, _, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		owner := fmt.Sprintf("default/s%d", i)
		if a.err != nil {
			t.Fatalf("caller %d: %v", i, a.err)
		}
		if len(a.taken) == 0 {
			for _, k := range a.keys {
				if owners[k] != owner {
					t.Errorf("caller %d was told it holds %s, but etcd says %q", i, k, owners[k])
				}
			}
			continue
		}
		for _, k := range a.keys {
			if owners[k] == owner {
				t.Errorf("caller %d was refused (taken %v), but etcd records it for %s", i, a.taken, k)
			}
		}
		if i%8 == 0 && !containsKey(a.taken, portKey(30000)) {
			t.Errorf("caller %d: taken %v does not name the port held from the start", i, a.taken)
		}
	}
	for p := range callers / 2 {
		k := portKey(31000 + p)
		if owners[k] == "" {
			t.Errorf("nobody got %s, though two callers wanted it", k)
		}
	}
	if owners[portKey(30000)] != "default/first" {
		t.Errorf("port 30000 held by %q, want default/first", owners[portKey(30000)])
	}
	resp, err := client.Get(ctx, "/registry/test/allocations/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if int(resp.Count) != len(owners) {
		t.Fatalf("etcd has %d keys, List %d", resp.Count, len(owners))
	}
}

func containsKey(keys []Key, k Key) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// A caller that gives up while its reservation still waits behind another
// batch hears so at once, and its keys are never sent; one whose batch is
// in flight gets that batch's answer.
func TestEtcdStoreReserveGivesUpWhileQueued(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	release := make(chan struct{})
	kv := scriptedKV{mu: &mu, calls: &calls, gates: []chan struct{}{release}, errs: []error{nil}}
	store := NewEtcdStore(&clientv3.Client{KV: kv}, "/registry/test/allocations")

	first := make(chan error, 1)
	go func() {
		_, err := store.Reserve(context.Background(), []Key{portKey(30000)}, "default/first")
		first <- err
	}()
	waitQueued(store, 0) // the first batch is in flight

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := store.Reserve(ctx, []Key{portKey(30001)}, "default/second")
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("queued reservation whose context ended: err %v, want %v", err, context.DeadlineExceeded)
		}
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("a queued reservation whose context ended still waits for the batch ahead of it")
	}
	store.mu.Lock()
	queued := len(store.queue)
	store.mu.Unlock()
	if queued != 0 {
		t.Errorf("%d reservations still queued after their caller gave up", queued)
	}

	close(release)
	if err := <-first; err != nil {
		t.Errorf("the reservation in flight: %v", err)
	}
}

// scriptedKV answers the n-th transaction with errs[n] (nil: success),
// each once its turn in gates is closed.
type scriptedKV struct {
	clientv3.KV
	mu    *sync.Mutex
	calls *int
	gates []chan struct{}
	errs  []error
}

func (kv scriptedKV) Txn(ctx context.Context) clientv3.Txn {
	kv.mu.Lock()
	n := *kv.calls
	*kv.calls++
	kv.mu.Unlock()
	return scriptedTxn{gate: kv.gates[n], err: kv.errs[n]}
}

type scriptedTxn struct {
	clientv3.Txn
	gate chan struct{}
	err  error
}

func (t scriptedTxn) If(...clientv3.Cmp) clientv3.Txn  { return t }
func (t scriptedTxn) Then(...clientv3.Op) clientv3.Txn { return t }
func (t scriptedTxn) Else(...clientv3.Op) clientv3.Txn { return t }
func (t scriptedTxn) Commit() (*clientv3.TxnResponse, error) {
	<-t.gate
	if t.err != nil {
		return nil, t.err
	}
	return &clientv3.TxnResponse{Succeeded: true}, nil
}

// A batch whose write failed may still have been stored (a timeout after
// the commit): retrying it one by one could find a caller's own keys and
// report them taken. Every caller of the batch gets the error instead.
func TestEtcdStoreFailedBatchReportsTheError(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	open := make(chan struct{})
	close(open)
	firstGate := make(chan struct{})
	failure := errors.New("etcdserver: request timed out")
	// Transaction 0: the first caller alone; 1: the batch of the next two
	// (fails); any more would be one-by-one retries.
	kv := scriptedKV{mu: &mu, calls: &calls,
		gates: []chan struct{}{firstGate, open, open, open},
		errs:  []error{nil, failure, nil, nil}}
	store := NewEtcdStore(&clientv3.Client{KV: kv}, "/registry/test/allocations")

	done := make(chan error, 3)
	go func() {
		_, err := store.Reserve(context.Background(), []Key{portKey(30000)}, "default/first")
		done <- err
	}()
	waitQueued(store, 0)
	var taken [2][]Key
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			taken[i], errs[i] = store.Reserve(context.Background(), []Key{portKey(30001 + i)}, fmt.Sprintf("default/s%d", i))
		}()
	}
	waitQueued(store, 2)
	close(firstGate)
	wg.Wait()
	if err := <-done; err != nil {
		t.Errorf("first reservation: %v", err)
	}
	for i := range 2 {
		if !errors.Is(errs[i], failure) || len(taken[i]) > 0 {
			t.Errorf("caller %d of the failed batch: taken %v, err %v; want the batch's error", i, taken[i], errs[i])
		}
	}
	if calls != 2 {
		t.Errorf("%d transactions, want 2 (the failed batch must not be retried one by one)", calls)
	}
}

// waitQueued waits until a batch is in flight with n reservations queued
// behind it.
func waitQueued(store *EtcdStore, n int) {
	for {
		store.mu.Lock()
		ok := store.flushing && len(store.queue) == n
		store.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
