package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"portal.dev/portal/allocator"
	"portal.dev/portal/apiserver/scheme"
	"portal.dev/portal/apiserver/svcconfig"
)

// newAllocator connects the Service allocator to the API's etcd; its
// reservations live next to the objects, under the same prefix.
func newAllocator(o Options, cfg svcconfig.ServiceConfig) (*allocator.Allocator, *clientv3.Client, error) {
	if o.embedded != nil {
		client := o.embedded.InProcessClient()
		return allocator.New(cfg, allocator.NewEtcdStore(client, o.EtcdPrefix+"/portal.dev/allocations/")), client, nil
	}
	client, err := newEtcdClient(o)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for the allocator: %w", err)
	}
	store := allocator.NewEtcdStore(client, o.EtcdPrefix+"/portal.dev/allocations/")
	return allocator.New(cfg, store), client, nil
}

// addAllocatorHooks starts following reservations before the server
// reports ready, and runs the repair loop.
func addAllocatorHooks(s *genericapiserver.GenericAPIServer, alloc *allocator.Allocator, etcd *clientv3.Client, repairInterval, leakGrace time.Duration) error {
	if err := s.AddPostStartHook("portal-service-allocator", unlessStopped(func(hc genericapiserver.PostStartHookContext) error {
		go alloc.Run(hc.Context)
		go func() {
			<-hc.Context.Done()
			etcd.Close()
		}()
		return wait.PollUntilContextTimeout(hc.Context, 20*time.Millisecond, time.Minute, true,
			func(context.Context) (bool, error) { return alloc.Synced(), nil })
	})); err != nil {
		return err
	}
	return s.AddPostStartHook("portal-service-allocation-repair", func(hc genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(hc.LoopbackClientConfig)
		if err != nil {
			return err
		}
		go runRepair(hc.Context, client, allocator.NewRepairer(alloc, leakGrace), repairInterval)
		return nil
	})
}

func runRepair(ctx context.Context, client kubernetes.Interface, r *allocator.Repairer, interval time.Duration) {
	if interval <= 0 {
		interval = time.Minute
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "portal-apiserver"})
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		list, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			klog.ErrorS(err, "Repair: listing services")
			return
		}
		problems, err := r.Repair(ctx, list.Items)
		if err != nil {
			klog.ErrorS(err, "Repair: reconciling reservations")
			return
		}
		for _, p := range problems {
			klog.InfoS("Repair found a problem", "service", p.Namespace+"/"+p.Name, "reason", p.Reason, "message", p.Message)
			ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name}
			recorder.Event(ref, corev1.EventTypeWarning, p.Reason, p.Message)
		}
	}, interval)
}

// allocatorReady is a /readyz check: Services cannot be allocated well
// before the reservations are loaded.
func allocatorReady(alloc *allocator.Allocator) healthz.HealthChecker {
	return healthz.NamedCheck("portal-service-allocator", func(*http.Request) error {
		if !alloc.Synced() {
			return fmt.Errorf("reservations not loaded yet")
		}
		return nil
	})
}
