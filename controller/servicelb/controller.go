// Package servicelb gives LoadBalancer Services addresses on bare metal:
// Services of type LoadBalancer with no spec.loadBalancerClass, or with
// class "portal.dev/servicelb", get addresses in status.loadBalancer.ingress
// (ipMode VIP) in one of two ways.
//
// With pools configured, each Service gets one address per IP family from
// them. A Service may ask for addresses with spec.loadBalancerIP or the
// annotation "portal.dev/loadbalancer-ips"; addresses are never shared.
//
// Without pools, as k3s's ServiceLB does, every Service gets the addresses
// of the nodes (see NodeAddresses), so that traffic to a node's address on
// the Service's port reaches the Service through the proxy, and a
// one-machine cluster answers on its own address with no configuration.
// A Service with externalTrafficPolicy Local gets only the addresses of
// the nodes that have a ready endpoint of it, since the proxy drops its
// external traffic on the others.
// The Services then share the addresses, so each port (protocol, family)
// belongs to one Service at a time: the first to hold it keeps it, and a
// Service wanting a port held by another stays pending, with no address,
// until the port is free. Ports other processes listen on the nodes'
// addresses (Options.Reserved: the Ingress controller's 80 and 443, the
// API server's, DNS's) no Service gets, and a Service wanting one stays
// pending, its Event naming the holder. Node changes (added, removed, addresses
// changed, NotReady, cordoned) update every Service. Requested addresses
// (spec.loadBalancerIP, the annotation) choose among pool addresses and
// are ignored here, as k3s ignores them.
//
// The controller owns the ingress list and the condition
// "portal.dev/LoadBalancerIPAllocated" of the Services it serves, written
// through the status subresource, and nothing else: it does not announce
// the addresses (ARP, BGP) or program any data path, which is the proxy's
// business. Its only state is the allocation (of pool addresses or of
// node ports), rebuilt at start from the Services' status, so a restart
// or a new leader keeps every assignment. Only one copy may run at a
// time; the caller elects it.
package servicelb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/loop"
)

const (
	// Class is the spec.loadBalancerClass this controller serves, besides
	// Services with no class.
	Class = "portal.dev/servicelb"
	// AnnotationIPs requests addresses: a comma-separated list, at most one
	// per IP family of the Service. It wins over spec.loadBalancerIP, which
	// must then be one of its addresses.
	AnnotationIPs = "portal.dev/loadbalancer-ips"
	// ConditionAllocated is the status condition telling whether the Service
	// has its addresses.
	ConditionAllocated = "portal.dev/LoadBalancerIPAllocated"
	// EventAllocationFailed is the reason of the Warning Event of a Service
	// left without addresses (a port held by another Service among them).
	EventAllocationFailed = "AllocationFailed"
	// EventIPAllocated is the reason of the Normal Event of a Service given
	// new addresses.
	EventIPAllocated = "IPAllocated"
)

// Options configure the controller.
type Options struct {
	// Pools are the addresses to hand out (see ParsePools); empty gives
	// Services the nodes' addresses instead.
	Pools Pools
	// Reserved are ports of the nodes' addresses other processes listen
	// on; without pools, a Service asking for one stays pending with an
	// Event naming its holder. With pools they do not matter: pool
	// addresses are not the nodes'.
	Reserved []ReservedPort
}

// Controller assigns pool addresses to LoadBalancer Services.
type Controller struct {
	client   kubernetes.Interface
	services corelisters.ServiceLister
	recorder record.EventRecorder
	src      source
	loop     *loop.Loop[string]

	mu sync.Mutex
	// pending are the Services refused their addresses, with the reason
	// told in their last Warning; they are retried whenever an address is
	// freed.
	pending map[string]string
}

// New returns a controller that watches Services (and, without pools,
// Nodes) through factory, which the caller starts, and writes their status
// and Events through client and recorder.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, opts Options) (*Controller, error) {
	if client == nil || factory == nil || recorder == nil {
		return nil, errors.New("servicelb: a client, an informer factory and an event recorder are required")
	}
	inf := factory.Core().V1().Services()
	c := &Controller{
		client:   client,
		services: inf.Lister(),
		recorder: recorder,
		src:      poolSource{NewAllocator(opts.Pools)},
		pending:  map[string]string{},
	}
	c.loop = loop.New(loop.Config[string]{
		Name:           "servicelb",
		Sync:           c.reconcile,
		Start:          c.start,
		ReportFailures: true,
	})
	err := c.loop.Watch(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueIfRelevant,
		UpdateFunc: func(old, cur any) {
			if relevant(old) || relevant(cur) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("servicelb: watch services: %w", err)
	}
	if len(opts.Pools) == 0 {
		if err := c.useNodes(factory, opts.Reserved); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// useNodes makes the Services share the nodes' addresses, and any change
// of what a node contributes to them update every served Service; a
// change of a Service's EndpointSlices updates it when its
// externalTrafficPolicy is Local.
func (c *Controller) useNodes(factory informers.SharedInformerFactory, reserved []ReservedPort) error {
	nodes := factory.Core().V1().Nodes()
	eps := factory.Discovery().V1().EndpointSlices()
	c.src = newNodeSource(nodes.Lister(), eps.Lister(), reserved)
	err := c.loop.Watch(eps.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueLocalService,
		UpdateFunc: func(_, cur any) { c.enqueueLocalService(cur) },
		DeleteFunc: c.enqueueLocalService,
	})
	if err != nil {
		return fmt.Errorf("servicelb: watch endpointslices: %w", err)
	}
	err = c.loop.Watch(nodes.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueServed() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			// What one node gives the Services is what NodeAddresses
			// makes of it alone (whether it has ExternalIPs decides for
			// the others only by having them). Heartbeats change none.
			if !ok1 || !ok2 || !slices.Equal(NodeAddresses([]*corev1.Node{o}), NodeAddresses([]*corev1.Node{n})) {
				c.enqueueServed()
			}
		},
		DeleteFunc: func(any) { c.enqueueServed() },
	})
	if err != nil {
		return fmt.Errorf("servicelb: watch nodes: %w", err)
	}
	return nil
}

// enqueueLocalService queues the Service of an EndpointSlice when the
// controller serves it with externalTrafficPolicy Local.
func (c *Controller) enqueueLocalService(obj any) {
	slice, ok := loop.FromTombstone[*discoveryv1.EndpointSlice](obj)
	if !ok || slice.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	svc, err := c.services.Services(slice.Namespace).Get(slice.Labels[discoveryv1.LabelServiceName])
	if err == nil && served(svc) && local(svc) {
		c.loop.Add(key(svc))
	}
}

// enqueueServed queues every Service the controller serves.
func (c *Controller) enqueueServed() {
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if served(svc) {
			c.loop.Add(key(svc))
		}
	}
}

// Run rebuilds the allocation from the Services once the informer has
// synced, then reconciles with the given number of workers until ctx ends.
// Every goroutine it starts has stopped when it returns.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers)
}

// start rebuilds the allocation, then reconciles every served Service once
// in age order before the workers start, so that after a restart or a
// failover the oldest waiting Services get the free addresses, not
// whichever the informer listed first.
func (c *Controller) start(ctx context.Context) error {
	keys, err := c.rebuild()
	if err != nil {
		return fmt.Errorf("rebuild load balancer IP allocation: %w", err)
	}
	for _, k := range keys {
		c.loop.SyncNow(ctx, k)
	}
	return nil
}

// rebuild records the addresses in the status of every Service this
// controller serves, oldest Service first, so that of two Services showing
// the same address the older keeps it and the other gets a new one. It
// returns the keys of those Services in that order.
func (c *Controller) rebuild() ([]string, error) {
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	slices.SortFunc(svcs, func(a, b *corev1.Service) int {
		if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(key(a), key(b))
	})
	svcs = slices.DeleteFunc(svcs, func(svc *corev1.Service) bool { return !served(svc) })
	keys := make([]string, 0, len(svcs))
	for _, svc := range svcs {
		keys = append(keys, key(svc))
	}
	c.src.rebuild(svcs)
	klog.V(2).InfoS("Rebuilt load balancer IP allocation", "services", len(svcs))
	return keys, nil
}

func (c *Controller) enqueueIfRelevant(obj any) {
	if relevant(obj) {
		c.enqueue(obj)
	}
}

func (c *Controller) enqueue(obj any) {
	if k, ok := loop.Key(obj); ok {
		c.loop.Add(k)
	}
}

// setPending records that the Service k was refused its addresses for
// reason, and reports whether that is news (a first refusal, or another
// reason than last time).
func (c *Controller) setPending(k, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, was := c.pending[k]
	c.pending[k] = reason
	return !was || old != reason
}

// clearPending records that the Service k waits for nothing.
func (c *Controller) clearPending(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, k)
}

// wakePending queues every Service waiting for addresses, after some were
// freed.
func (c *Controller) wakePending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.pending {
		c.loop.Add(k)
	}
}

// relevant reports whether a Service event may concern the controller: a
// LoadBalancer Service, or one that carries its condition.
func relevant(obj any) bool {
	svc, ok := obj.(*corev1.Service)
	return ok && (svc.Spec.Type == corev1.ServiceTypeLoadBalancer || findCondition(svc) != nil)
}

// served reports whether the controller gives svc addresses.
func served(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		(svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == Class)
}

// ingressIPs returns the addresses in svc's status.
func ingressIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func key(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }
