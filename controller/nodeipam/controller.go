// Package nodeipam gives every Node its spec.podCIDR(s): node-sized subnets
// of the cluster CIDR(s), one per IP family, like kube-controller-manager's
// range allocator. It owns only those two fields; a Node that already has
// them (given to its agent with --pod-cidr, or by an earlier run) keeps
// them and they are counted as taken. The allocator is rebuilt from the
// Nodes at every start, so nothing is stored outside the API.
package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/loop"
)

// Options configure a Controller.
type Options struct {
	// ClusterCIDRs are the pod address ranges, at most one per IP family
	// (kube-controller-manager's --cluster-cidr).
	ClusterCIDRs []netip.Prefix
	// NodeCIDRMaskSizeIPv4 and NodeCIDRMaskSizeIPv6 are the sizes of a
	// node's subnets; 0 means upstream's defaults, 24 and 64.
	NodeCIDRMaskSizeIPv4, NodeCIDRMaskSizeIPv6 int
}

// Validate reports options the controller could not start with: more
// than one range per family, or a node mask size that does not fit its
// cluster range.
func (o Options) Validate() error {
	_, err := newSets(o)
	return err
}

// Controller allocates pod CIDRs to Nodes.
type Controller struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	loop   *loop.Loop[string]
	err    error

	mu   sync.Mutex
	sets []*CIDRSet
	// given is what this controller believes each node holds, so a delete
	// releases exactly that.
	given map[string][]netip.Prefix
}

// New returns a controller that reads Nodes from factory and patches them
// through client. A bad Options is reported by Run.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) *Controller {
	inf := factory.Core().V1().Nodes()
	c := &Controller{
		client: client,
		nodes:  inf.Lister(),
		given:  map[string][]netip.Prefix{},
	}
	c.sets, c.err = newSets(opts)
	c.loop = loop.New(loop.Config[string]{
		Name:           "nodeipam",
		Sync:           c.sync,
		ReportFailures: true,
		Start:          c.occupyExisting,
	})
	err := c.loop.Watch(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if n, ok := loop.FromTombstone[*corev1.Node](obj); ok {
				c.release(n.Name)
			}
		},
	})
	if err != nil && c.err == nil {
		c.err = err
	}
	return c
}

func newSets(opts Options) ([]*CIDRSet, error) {
	if len(opts.ClusterCIDRs) == 0 {
		return nil, fmt.Errorf("nodeipam: no cluster CIDR")
	}
	if len(opts.ClusterCIDRs) > 2 || (len(opts.ClusterCIDRs) == 2 && opts.ClusterCIDRs[0].Addr().Is4() == opts.ClusterCIDRs[1].Addr().Is4()) {
		return nil, fmt.Errorf("nodeipam: cluster CIDRs %v: want one, or one IPv4 and one IPv6", opts.ClusterCIDRs)
	}
	var sets []*CIDRSet
	for _, p := range opts.ClusterCIDRs {
		size := opts.NodeCIDRMaskSizeIPv4
		if size == 0 {
			size = 24
		}
		if p.Addr().Is6() {
			size = opts.NodeCIDRMaskSizeIPv6
			if size == 0 {
				size = 64
			}
		}
		s, err := NewCIDRSet(p, size)
		if err != nil {
			return nil, fmt.Errorf("nodeipam: %w", err)
		}
		sets = append(sets, s)
	}
	return sets, nil
}

func (c *Controller) enqueue(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	_, known := c.given[n.Name]
	c.mu.Unlock()
	if !known || len(n.Spec.PodCIDRs) == 0 {
		c.loop.Add(n.Name)
	}
}

// Run waits for the Node cache, marks every existing node CIDR taken, then
// allocates with workers goroutines until ctx ends.
// With bad options it only logs why it does not start, once the cache
// has synced, and returns when ctx ends like any other controller.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers)
}

// occupyExisting marks the CIDRs of every Node in the cache taken, before
// any is allocated.
func (c *Controller) occupyExisting(ctx context.Context) error {
	if c.err != nil {
		return fmt.Errorf("node IPAM controller not started: %w", c.err)
	}
	nodes, err := c.nodes.List(everything)
	if err != nil {
		return nil // each Node's sync occupies its CIDRs as well
	}
	for _, n := range nodes {
		c.occupy(ctx, n)
	}
	return nil
}

// occupy records a node's existing CIDRs as taken.
func (c *Controller) occupy(ctx context.Context, n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.given[n.Name]; ok || len(n.Spec.PodCIDRs) == 0 {
		return
	}
	var held []netip.Prefix
	for _, s := range n.Spec.PodCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		for _, set := range c.sets {
			if set.Contains(p) {
				if err := set.Occupy(p); err != nil {
					klog.FromContext(ctx).Info("Node pod CIDR is not a node subnet of the cluster CIDR; left alone", "node", n.Name, "podCIDR", p, "err", err)
					continue
				}
				held = append(held, p)
			}
		}
	}
	c.given[n.Name] = held
}

func (c *Controller) release(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.given[name] {
		for _, set := range c.sets {
			if set.Contains(p) {
				set.Release(p)
			}
		}
	}
	delete(c.given, name)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(n.Spec.PodCIDRs) > 0 {
		c.occupy(ctx, n)
		return nil
	}
	cidrs, err := c.allocate(name)
	if err != nil {
		return err
	}
	strs := make([]string, len(cidrs))
	for i, p := range cidrs {
		strs[i] = p.String()
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": strs[0], "podCIDRs": strs}})
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metavOpts); err != nil {
		c.release(name)
		return fmt.Errorf("patch node %s with pod CIDRs %v: %w", name, strs, err)
	}
	klog.FromContext(ctx).Info("Allocated node pod CIDRs", "node", name, "podCIDRs", strs)
	return nil
}

func (c *Controller) allocate(name string) ([]netip.Prefix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held := c.given[name]; len(held) > 0 {
		// Allocated before, but the patch has not reached the cache yet
		// (or failed): give the same subnets again.
		return held, nil
	}
	var got []netip.Prefix
	for _, set := range c.sets {
		p, err := set.Allocate()
		if err != nil {
			for i, q := range got {
				c.sets[i].Release(q)
			}
			return nil, err
		}
		got = append(got, p)
	}
	c.given[name] = got
	return got, nil
}
