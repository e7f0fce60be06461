package apiserver

import (
	"context"
	"testing"
	"time"

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
	newInProcessStorage(nil, client, 0)
	deadline := time.Now().Add(10 * time.Second)
	for !etcdfeature.DefaultFeatureSupportChecker.Supports(storage.RequestWatchProgress) {
		if time.Now().After(deadline) {
			t.Fatal("RequestWatchProgress is not supported on the in-process etcd client after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
