package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"portal.dev/portal/controller/clusterroleaggregation"
	"portal.dev/portal/controller/daemonset"
	"portal.dev/portal/controller/deployment"
	"portal.dev/portal/controller/endpoints"
	"portal.dev/portal/controller/endpointslice"
	"portal.dev/portal/controller/gc"
	"portal.dev/portal/controller/mirroring"
	"portal.dev/portal/controller/nodeipam"
	"portal.dev/portal/controller/nodelifecycle"
	"portal.dev/portal/controller/podgc"
	"portal.dev/portal/controller/replicaset"
	"portal.dev/portal/controller/rootcacertpublisher"
	"portal.dev/portal/controller/scheduler"
	"portal.dev/portal/controller/serviceaccount"
	"portal.dev/portal/controller/servicelb"
	"portal.dev/portal/controller/statefulset"
)

// controllerContext is what a controller needs to start.
type controllerContext struct {
	// client is the controller's own: each controller gets one with its
	// own rate limiter, as upstream's controllers each have their own
	// client, so that one busy controller (a ReplicaSet creating 1,000
	// pods) does not hold back another (the scheduler binding them).
	client kubernetes.Interface
	// newClient builds such a client; the informers share another.
	newClient func(controller string) (kubernetes.Interface, error)
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	informers informers.SharedInformerFactory
	opts      Options
	recorder  func(component string) record.EventRecorder
	// shutdown stops the event broadcaster behind recorder.
	shutdown func()
	// registerer receives every controller's metrics while it runs.
	registerer prometheus.Registerer
	// rootCA is the PEM of the CA the manager trusts the API server by,
	// which the root CA publisher hands to pods.
	rootCA []byte
}

// runner is a built controller: Run returns once ctx has ended and every
// goroutine it started has stopped.
type runner interface {
	Run(ctx context.Context, workers int)
}

// starter builds a controller on the shared informers; nil, nil means the
// options leave it off.
type starter struct {
	name  string
	build func(c controllerContext) (runner, error)
}

// late controllers start once the others' caches have synced: the garbage
// collector lists every resource, and competing with the endpoint
// controllers' first lists would delay what users wait for.
var late = map[string]bool{"garbagecollector": true}

// endpointBatchPeriod is the BatchPeriod of both endpoint controllers: a
// Service whose Pods keep changing is synced five times a second at most,
// so that scaling to a thousand Pods does not recompute the Service for
// every Pod, and the last change waits at most that long. A change after a
// quiet spell is synced at once.
const endpointBatchPeriod = 200 * time.Millisecond

// starters lists the controllers, in start order.
var starters = []starter{
	{"endpointslice", func(c controllerContext) (runner, error) {
		return endpointslice.New(c.client, c.informers, endpointslice.Options{
			MaxEndpointsPerSlice: c.opts.MaxEndpointsPerSlice,
			BatchPeriod:          endpointBatchPeriod,
			Registerer:           c.registerer,
		}), nil
	}},
	{"endpoints", func(c controllerContext) (runner, error) {
		return endpoints.New(c.client, c.informers, endpoints.Options{
			BatchPeriod: endpointBatchPeriod,
			Registerer:  c.registerer,
		}), nil
	}},
	{"endpointslicemirroring", func(c controllerContext) (runner, error) {
		return mirroring.New(c.client, c.informers, mirroring.Options{Registerer: c.registerer}), nil
	}},
	{"garbagecollector", func(c controllerContext) (runner, error) {
		return gc.New(c.metadata, c.discovery, gc.Options{Registerer: c.registerer})
	}},
	{"servicelb", buildServiceLB},
	{"nodelifecycle", func(c controllerContext) (runner, error) {
		return nodelifecycle.New(c.client, c.informers, nodelifecycle.Options{
			NodeMonitorGracePeriod: c.opts.NodeMonitorGracePeriod,
			Registerer:             c.registerer,
		}), nil
	}},
	{"podgc", func(c controllerContext) (runner, error) {
		threshold := c.opts.TerminatedPodGCThreshold
		if threshold <= 0 {
			threshold = -1 // keep them all
		}
		return podgc.New(c.client, c.informers, podgc.Options{TerminatedPodThreshold: threshold, Registerer: c.registerer}), nil
	}},
	{"nodeipam", func(c controllerContext) (runner, error) {
		cidrs, err := ParseClusterCIDRs(c.opts.ClusterCIDR)
		if err != nil || len(cidrs) == 0 {
			return nil, err
		}
		return nodeipam.New(c.client, c.informers, nodeipam.Options{ClusterCIDRs: cidrs,
			NodeCIDRMaskSizeIPv4: c.opts.NodeCIDRMaskSizeIPv4, NodeCIDRMaskSizeIPv6: c.opts.NodeCIDRMaskSizeIPv6}), nil
	}},
	{"replicaset", func(c controllerContext) (runner, error) {
		return replicaset.New(c.client, c.informers, c.recorder("replicaset-controller"), replicaset.Options{
			Registerer: c.registerer,
		}), nil
	}},
	{"daemonset", func(c controllerContext) (runner, error) {
		return daemonset.New(c.client, c.informers, c.recorder("daemonset-controller"), daemonset.Options{}), nil
	}},
	{"statefulset", func(c controllerContext) (runner, error) {
		return statefulset.New(c.client, c.informers, c.recorder("statefulset-controller"), statefulset.Options{}), nil
	}},
	{"deployment", func(c controllerContext) (runner, error) {
		return deployment.New(c.client, c.informers, c.recorder("deployment-controller"), deployment.Options{
			Registerer: c.registerer,
		}), nil
	}},
	{"serviceaccount", func(c controllerContext) (runner, error) {
		return serviceaccount.New(c.client, c.informers), nil
	}},
	{"root-ca-cert-publisher", func(c controllerContext) (runner, error) {
		if len(c.rootCA) == 0 {
			return nil, nil // no CA to publish: the API is not TLS-verified
		}
		return rootcacertpublisher.New(c.client, c.informers, c.rootCA), nil
	}},
	{"clusterrole-aggregation", func(c controllerContext) (runner, error) {
		return clusterroleaggregation.New(c.client, c.informers), nil
	}},
	{"scheduler", func(c controllerContext) (runner, error) {
		return scheduler.New(c.client, c.informers, c.recorder("default-scheduler"), scheduler.Options{
			Registerer: c.registerer,
		}), nil
	}},
}

// newRecorders returns a function giving each controller an event
// recorder under its own name, all writing through one broadcaster, and
// the function that stops the broadcaster. The broadcaster takes ctx's
// values, not its end: the term stops it once its controllers have
// stopped, so that the Events they record on the way out are written.
func newRecorders(ctx context.Context, client kubernetes.Interface) (func(string) record.EventRecorder, func()) {
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return func(component string) record.EventRecorder {
		return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
	}, broadcaster.Shutdown
}

// buildServiceLB builds the LoadBalancer IP controller: with pools it
// hands out their addresses, without it gives Services the nodes'.
func buildServiceLB(c controllerContext) (runner, error) {
	pools, err := servicelb.ParsePools(c.opts.LoadBalancerIPPools)
	if err != nil {
		return nil, fmt.Errorf("--loadbalancer-ip-pools: %w", err)
	}
	reserved, err := c.opts.reservedPorts()
	if err != nil {
		return nil, err
	}
	return servicelb.New(c.client, c.informers, c.recorder("servicelb-controller"), servicelb.Options{Pools: pools, Reserved: reserved})
}

// startControllers builds the early or the late controllers and runs each
// in a goroutine of wg until ctx ends. It returns the names of those it
// started; on an error, those already started keep running until ctx ends.
func startControllers(ctx context.Context, wg *sync.WaitGroup, c controllerContext, lateOnes bool) ([]string, error) {
	var names []string
	for _, s := range starters {
		if late[s.name] != lateOnes {
			continue
		}
		client, err := c.newClient(s.name)
		if err != nil {
			return names, fmt.Errorf("%s: %w", s.name, err)
		}
		c := c
		c.client = client
		ctrl, err := s.build(c)
		if err != nil {
			return names, fmt.Errorf("%s: %w", s.name, err)
		}
		if ctrl == nil {
			continue
		}
		wg.Go(func() { ctrl.Run(ctx, c.opts.Workers) })
		names = append(names, s.name)
	}
	return names, nil
}

func metaFor(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "kube-system", Name: name}
}
