package apiserver

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"portal.dev/portal/apiserver/embeddedetcd"
)

// Without RequestWatchProgress the watch cache serves no consistent reads
// (every plain LIST goes to etcd) and refuses streaming lists, which
// client-go's informers try first. The in-process client has no endpoints
// of its own, so the feature must still be found on it.
func TestInProcessStorageSupportsWatchProgress(t *testing.T) {
	srv := startTestEtcd(t)
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
	srv := startTestEtcd(t)
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
			put, err := client.Put(t.Context(), "/registry/configmaps/default/"+tc.name, "x")
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

// Each watch cache used to make its etcd store keep a size and revision
// for every key (k8s.io/apiserver's SizeBasedListCostEstimate), about 130
// bytes per stored object, for an estimate only Priority and Fairness,
// which Portal does not run, reads. The stores now report object counts
// without a size estimate once the watch cache has seen the object.
func TestStoresKeepNoSizeEstimates(t *testing.T) {
	srv := startTestEtcd(t)
	client := srv.InProcessClient()
	defer client.Close()
	g := newEtcdStorage(nil, client, 0)
	f := &storageFactory{}
	cfg, err := f.NewConfig(schema.GroupResource{Resource: "configmaps"}, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Prefix, cfg.EventsHistoryWindow = "/registry", storagebackend.DefaultEventsHistoryWindow
	keyFunc := func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc("/configmaps/", obj) }
	s, destroy, err := g.withCacher(cfg, "/configmaps", keyFunc,
		func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} },
		storage.DefaultNamespaceScopedAttr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer destroy()
	deadline := time.Now().Add(10 * time.Second)
	for s.ReadinessCheck() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("watch cache not ready after 10s: %v", s.ReadinessCheck())
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx := t.Context()
	key := "/configmaps/default/a"
	out := &corev1.ConfigMap{}
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if err := s.Create(ctx, key, in, out, 0); err != nil {
		t.Fatal(err)
	}
	// A read from the cache at the create's version returns once the
	// watch cache has the object, which its store's watch (the
	// estimator's source) passed on.
	got := &corev1.ConfigMap{}
	if err := s.Get(ctx, key, storage.GetOptions{ResourceVersion: out.ResourceVersion}, got); err != nil {
		t.Fatal(err)
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.ObjectCount != 1 || stats.EstimatedAverageObjectSizeBytes != 0 {
		t.Errorf("stats: got %d objects of %d bytes on average, want 1 object and no size estimate",
			stats.ObjectCount, stats.EstimatedAverageObjectSizeBytes)
	}
}

// startTestEtcd starts an embedded etcd that stops at the test's end.
func startTestEtcd(t *testing.T) *embeddedetcd.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := embeddedetcd.Start(ctx, t.TempDir())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		cancel()
	})
	return srv
}
