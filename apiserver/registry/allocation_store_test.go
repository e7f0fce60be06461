package registry

import (
	"context"
	"net/netip"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"portal.dev/portal/allocator"
	"portal.dev/portal/apiserver/embeddedetcd"
	"portal.dev/portal/apiserver/svcconfig"
)

// lateStorage answers a create with err at once and keeps the write itself
// for land: what etcd does with a proposal still in raft when the request
// ends (cancelled by its client, or given up at a leader change), which
// the new leader may commit after the error, and after a read. With err
// nil, creates go straight through.
type lateStorage struct {
	storage.Interface
	err       error
	land      func()
	updateErr error
}

func (l *lateStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	l.land = func() {
		if err := l.Interface.Create(context.Background(), key, obj, out, ttl); err != nil {
			panic(err)
		}
	}
	if l.err == nil {
		l.land()
		return nil
	}
	return l.err
}

// GuaranteedUpdate fails with updateErr, when set, after computing the
// update and without storing it.
func (l *lateStorage) GuaranteedUpdate(ctx context.Context, key string, dest runtime.Object, ignoreNotFound bool,
	precond *storage.Preconditions, tryUpdate storage.UpdateFunc, cached runtime.Object) error {
	if l.updateErr == nil {
		return l.Interface.GuaranteedUpdate(ctx, key, dest, ignoreNotFound, precond, tryUpdate, cached)
	}
	return l.Interface.GuaranteedUpdate(ctx, key, dest, ignoreNotFound, precond,
		func(in runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			if _, _, err := tryUpdate(in, res); err != nil {
				return nil, nil, err
			}
			return nil, nil, l.updateErr
		}, cached)
}

// lateOptions stores in etcd through a lateStorage.
type lateOptions struct {
	etcdOptions
	late *lateStorage
}

func (o lateOptions) GetRESTOptions(gr schema.GroupResource, obj runtime.Object) (generic.RESTOptions, error) {
	opts, err := o.etcdOptions.GetRESTOptions(gr, obj)
	if err != nil {
		return opts, err
	}
	opts.Decorator = func(cfg *storagebackend.ConfigForResource, prefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := generic.UndecoratedStorage(cfg, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		o.late.Interface = s
		return o.late, destroy, err
	}
	return opts, nil
}

// TestCreateLandedAfterItsRead pins the node port given twice in
// TestHAEtcdPartition: a Service create that etcd answered with an error
// while its proposal was still in raft read the stored Service, found
// none, gave its node port back, and was committed afterwards; a later
// Service got the same port. A write etcd did not refuse for sure keeps
// its reservations (repair frees them if it never lands); one etcd
// refused for sure (the name was taken) gives them back.
func TestCreateLandedAfterItsRead(t *testing.T) {
	etcd, err := embeddedetcd.Start(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	backend := storagebackend.NewDefaultConfig("/registry", nil)
	backend.Transport.ServerList = []string{etcd.Endpoint}
	backend.Transport.CertFile, backend.Transport.KeyFile = etcd.CertFile, etcd.KeyFile
	backend.Transport.TrustedCAFile = etcd.CAFile

	cases := []struct {
		name     string
		err      error
		lands    bool
		wantKept bool
	}{
		{name: "request cancelled, committed later", err: context.Canceled, lands: true, wantKept: true},
		{name: "leader lost, committed later", err: rpctypes.ErrTimeoutDueToLeaderFail, lands: true, wantKept: true},
		{name: "the name was taken", err: storage.NewKeyExistsError("/registry/services/default/web", 0), wantKept: false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := svcconfig.ServiceConfig{
				ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
				NodePortRange:   svcconfig.PortRange{Base: 30000, Size: 10},
			}
			rcfg := Config{Service: cfg, Allocator: allocator.New(cfg, allocator.NewMemoryStore())}
			var kind Kind
			for _, k := range Kinds(rcfg) {
				if k.Resource == "services" {
					kind = k
				}
			}
			late := &lateStorage{err: tc.err}
			be := *backend
			be.Prefix = "/registry" + string(rune('a'+i))
			main, _, err := NewStore(kind, lateOptions{etcdOptions{base: be}, late})
			if err != nil {
				t.Fatal(err)
			}
			defer main.Destroy()
			ctx := genericapirequest.WithNamespace(genericapirequest.WithRequestInfo(context.Background(), &genericapirequest.RequestInfo{}), "default")

			web := nodePortService("web", 30001)
			if _, err := main.Create(ctx, web, nil, &metav1.CreateOptions{}); err == nil || late.land == nil {
				t.Fatalf("the create answered %v, want the injected error from etcd", err)
			}
			if tc.lands {
				late.land()
			}
			late.err = nil
			other := nodePortService("other", 30001)
			_, err = main.Create(ctx, other, nil, &metav1.CreateOptions{})
			if kept := apierrors.IsInvalid(err); kept != tc.wantKept {
				t.Errorf("a second Service asking for node port 30001 after the failed create: got %v, want refused %v", err, tc.wantKept)
			}
		})
	}
}

// nodePortService is a defaulted NodePort Service asking for port.
func nodePortService(name string, port int32) *corev1.Service {
	cluster := corev1.ServiceInternalTrafficPolicyCluster
	return testService(name, corev1.ServiceTypeNodePort, func(s *corev1.Service) {
		s.Spec.Ports = s.Spec.Ports[:1]
		s.Spec.Ports[0].NodePort = port
		s.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		s.Spec.InternalTrafficPolicy = &cluster
	})
}

// TestUpdateThatFailedKeepsDroppedPorts: the generic store settles an
// update's allocation before it writes, so an update that drops a node
// port (NodePort to ClusterIP) gave the port back although its write then
// failed and the stored Service kept it; the next Service got the port.
// What an update drops goes back only once the update is stored.
func TestUpdateThatFailedKeepsDroppedPorts(t *testing.T) {
	etcd, err := embeddedetcd.Start(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	backend := storagebackend.NewDefaultConfig("/registry", nil)
	backend.Transport.ServerList = []string{etcd.Endpoint}
	backend.Transport.CertFile, backend.Transport.KeyFile = etcd.CertFile, etcd.KeyFile
	backend.Transport.TrustedCAFile = etcd.CAFile
	cases := []struct {
		name     string
		err      error
		wantKept bool
	}{
		{name: "the update failed", err: rpctypes.ErrTimeoutDueToLeaderFail, wantKept: true},
		{name: "the update was stored", wantKept: false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := svcconfig.ServiceConfig{
				ClusterIPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
				NodePortRange:   svcconfig.PortRange{Base: 30000, Size: 10},
			}
			rcfg := Config{Service: cfg, Allocator: allocator.New(cfg, allocator.NewMemoryStore())}
			var kind Kind
			for _, k := range Kinds(rcfg) {
				if k.Resource == "services" {
					kind = k
				}
			}
			late := &lateStorage{}
			be := *backend
			be.Prefix = "/registry" + string(rune('a'+i))
			main, _, err := NewStore(kind, lateOptions{etcdOptions{base: be}, late})
			if err != nil {
				t.Fatal(err)
			}
			defer main.Destroy()
			ctx := genericapirequest.WithNamespace(genericapirequest.WithRequestInfo(context.Background(), &genericapirequest.RequestInfo{}), "default")
			created, err := main.Create(ctx, nodePortService("web", 30001), nil, &metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			update := created.(*corev1.Service).DeepCopy()
			update.Spec.Type = corev1.ServiceTypeClusterIP
			update.Spec.Ports[0].NodePort = 0
			update.Spec.ExternalTrafficPolicy = ""
			late.updateErr = tc.err
			_, _, err = main.Update(ctx, "web", rest.DefaultUpdatedObjectInfo(update), nil, nil, false, &metav1.UpdateOptions{})
			if failed := err != nil; failed != (tc.err != nil) {
				t.Fatalf("the update answered %v, want failed %v", err, tc.err != nil)
			}
			late.updateErr = nil
			_, err = main.Create(ctx, nodePortService("other", 30001), nil, &metav1.CreateOptions{})
			if kept := apierrors.IsInvalid(err); kept != tc.wantKept {
				t.Errorf("a second Service asking for node port 30001 after the update: got %v, want refused %v", err, tc.wantKept)
			}
		})
	}
}
