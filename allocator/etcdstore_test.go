package allocator

import (
	"context"
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
