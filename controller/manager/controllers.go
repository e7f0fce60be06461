package manager

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/component-base/metrics/legacyregistry"

	"portal.dev/portal/controller/endpoints"
	"portal.dev/portal/controller/endpointslice"
	"portal.dev/portal/controller/gc"
	"portal.dev/portal/controller/mirroring"
	"portal.dev/portal/controller/nodeipam"
	"portal.dev/portal/controller/nodelifecycle"
	"portal.dev/portal/controller/scheduler"
	"portal.dev/portal/controller/servicelb"
)

// controllerContext is what a controller needs to start.
type controllerContext struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	informers informers.SharedInformerFactory
	opts      Options
	recorder  func(component string) record.EventRecorder
}

// starter builds a controller on the shared informers and starts it in the
// background; it runs until ctx ends.
type starter struct {
	name  string
	start func(ctx context.Context, c controllerContext) error
}

// late controllers start once the others' caches have synced: the garbage
// collector lists every resource, and competing with the endpoint
// controllers' first lists would delay what users wait for.
var late = map[string]bool{"garbagecollector": true}

// starters lists the controllers, in start order.
var starters = []starter{
	{"endpointslice", func(ctx context.Context, c controllerContext) error {
		ctrl := endpointslice.New(c.client, c.informers, endpointslice.Options{
			MaxEndpointsPerSlice: c.opts.MaxEndpointsPerSlice,
			Registerer:           legacyregistry.Registerer(),
		})
		go ctrl.Run(ctx, c.opts.Workers)
		return nil
	}},
	{"endpoints", func(ctx context.Context, c controllerContext) error {
		ctrl := endpoints.New(c.client, c.informers, endpoints.Options{})
		go ctrl.Run(ctx, c.opts.Workers)
		return nil
	}},
	{"endpointslicemirroring", func(ctx context.Context, c controllerContext) error {
		ctrl := mirroring.New(c.client, c.informers, mirroring.Options{})
		go ctrl.Run(ctx, c.opts.Workers)
		return nil
	}},
	{"garbagecollector", func(ctx context.Context, c controllerContext) error {
		ctrl, err := gc.New(c.metadata, c.discovery, gc.Options{Registerer: legacyregistry.Registerer()})
		if err != nil {
			return err
		}
		go ctrl.Run(ctx, c.opts.Workers)
		return nil
	}},
	{"servicelb", startServiceLB},
	{"nodelifecycle", func(ctx context.Context, c controllerContext) error {
		ctrl := nodelifecycle.New(c.client, c.informers, nodelifecycle.Options{
			NodeMonitorGracePeriod: c.opts.NodeMonitorGracePeriod,
			Registerer:             legacyregistry.Registerer(),
		})
		go ctrl.Run(ctx, c.opts.Workers)
		return nil
	}},
	{"nodeipam", func(ctx context.Context, c controllerContext) error {
		cidrs, err := ParseClusterCIDRs(c.opts.ClusterCIDR)
		if err != nil || len(cidrs) == 0 {
			return err
		}
		ctrl := nodeipam.New(c.client, c.informers, nodeipam.Options{ClusterCIDRs: cidrs,
			NodeCIDRMaskSizeIPv4: c.opts.NodeCIDRMaskSizeIPv4, NodeCIDRMaskSizeIPv6: c.opts.NodeCIDRMaskSizeIPv6})
		go ctrl.Run(ctx, c.opts.Workers)
		return nil
	}},
	{"scheduler", func(ctx context.Context, c controllerContext) error {
		ctrl := scheduler.New(c.client, c.informers, c.recorder("default-scheduler"), scheduler.Options{
			Registerer: legacyregistry.Registerer(),
		})
		go ctrl.Run(ctx, c.opts.Workers)
		return nil
	}},
}

// newRecorders returns a function giving each controller an event
// recorder under its own name, all writing through one broadcaster that
// stops with ctx.
func newRecorders(ctx context.Context, client kubernetes.Interface) func(string) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() { <-ctx.Done(); broadcaster.Shutdown() }()
	return func(component string) record.EventRecorder {
		return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
	}
}

// startServiceLB runs the LoadBalancer IP controller when pools are given.
func startServiceLB(ctx context.Context, c controllerContext) error {
	if c.opts.LoadBalancerIPPools == "" {
		return nil
	}
	pools, err := servicelb.ParsePools(c.opts.LoadBalancerIPPools)
	if err != nil {
		return fmt.Errorf("--loadbalancer-ip-pools: %w", err)
	}
	ctrl, err := servicelb.New(c.client, c.informers, c.recorder("servicelb-controller"), servicelb.Options{Pools: pools})
	if err != nil {
		return err
	}
	go ctrl.Run(ctx, c.opts.Workers)
	return nil
}

func startControllers(ctx context.Context, c controllerContext, lateOnes bool) ([]string, error) {
	var names []string
	for _, s := range starters {
		if late[s.name] != lateOnes {
			continue
		}
		if err := s.start(ctx, c); err != nil {
			return names, err
		}
		names = append(names, s.name)
	}
	return names, nil
}

func metaFor(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "kube-system", Name: name}
}
