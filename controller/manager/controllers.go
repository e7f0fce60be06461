package manager

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/component-base/metrics/legacyregistry"

	"portal.dev/portal/controller/endpoints"
	"portal.dev/portal/controller/endpointslice"
	"portal.dev/portal/controller/mirroring"
)

// controllerContext is what a controller needs to start.
type controllerContext struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	informers informers.SharedInformerFactory
	opts      Options
}

// starter builds a controller on the shared informers and starts it in the
// background; it runs until ctx ends.
type starter struct {
	name  string
	start func(ctx context.Context, c controllerContext) error
}

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
}

func startControllers(ctx context.Context, c controllerContext) ([]string, error) {
	var names []string
	for _, s := range starters {
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
