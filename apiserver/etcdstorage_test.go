package apiserver

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"

	"portal.dev/portal/apiserver/embeddedetcd"
)

// Without RequestWatchProgress the watch cache serves no consistent reads
// (every plain LIST goes to etcd) and refuses streaming lists, which
// client-go's informers try first. The in-process client has no endpoints
// of its own, so the feature must still be found on it.
func TestInProcessStorageSupportsWatchProgress(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := embeddedetcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := srv.InProcessClient()
	defer client.Close()
	newEtcdStorage(nil, client, 0)
	deadline := time.Now().Add(10 * time.Second)
	for !etcdfeature.DefaultFeatureSupportChecker.Supports(storage.RequestWatchProgress) {
		if time.Now().After(deadline) {
			t.Fatal("RequestWatchProgress is not supported on the in-process etcd client after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The watch caches drop their store snapshots below the revision their
// stores report as compacted. Before the snapshot window that was etcd's
// compaction only, every 5 minutes, so the snapshots of a burst of writes
// stayed in memory that long; now the stores report the revision etcd was
// at a window ago even when etcd was never compacted, on the embedded
// etcd's in-process client and on a client of an external etcd
// (--etcd-servers) alike.
func TestStoresReportTheSnapshotWindow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := embeddedetcd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tests := []struct {
		name   string
		client func() (*clientv3.Client, error)
	}{
		{name: "in-process", client: func() (*clientv3.Client, error) { return srv.InProcessClient(), nil }},
		{name: "external", client: func() (*clientv3.Client, error) {
			return newEtcdClient(Options{EtcdServers: []string{srv.Endpoint}, EtcdCAFile: srv.CAFile, EtcdCertFile: srv.CertFile, EtcdKeyFile: srv.KeyFile})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, err := tc.client()
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			put, err := client.Put(ctx, "/registry/configmaps/default/"+tc.name, "x")
			if err != nil {
				t.Fatal(err)
			}
			g := newEtcdStorage(nil, client, 0) // etcd is never compacted
			g.snapshotWindow = 0
			c := g.openCompactor()
			defer g.closeCompactor()
			deadline := time.Now().Add(10 * time.Second)
			for c.CompactRevision() < put.Header.Revision {
				if time.Now().After(deadline) {
					t.Fatalf("compaction revision after 10s: got %d, want at least %d (the last write's)", c.CompactRevision(), put.Header.Revision)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
