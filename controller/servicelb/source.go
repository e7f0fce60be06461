package servicelb

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"

	"portal.dev/portal/internal/nodeaddr"
)

// ErrNoNodeAddress: no node the Services may use has an address of the
// Service's IP families.
var ErrNoNodeAddress = errors.New("no ready, schedulable node has an address")

// LabelExcludeFromLB keeps a node's addresses out of LoadBalancer
// Services, as upstream's service controller honours it.
const LabelExcludeFromLB = corev1.LabelNodeExcludeBalancers

// source gives Services their addresses: from the pools, or the nodes'.
type source interface {
	// assign gives Service k (svc) its addresses, or, with an error, the
	// addresses it keeps and why it cannot have what it asks; freed says
	// whether it let go of something another Service may wait for.
	assign(k string, svc *corev1.Service) (ips []netip.Addr, freed bool, err error)
	// release forgets Service k and reports whether that freed anything.
	release(k string) (freed bool)
	// assigned returns the addresses Service k was last given.
	assigned(k string) []netip.Addr
	// rebuild records what the served Services show in their status,
	// oldest first, so the older of two claiming the same thing keeps it.
	rebuild(svcs []*corev1.Service)
}

// poolSource hands out addresses of the pools, one per family, never
// shared.
type poolSource struct {
	alloc *Allocator
}

func (s poolSource) assign(k string, svc *corev1.Service) ([]netip.Addr, bool, error) {
	before := s.alloc.Assigned(k)
	reqs, err := requests(svc, s.alloc.pools)
	if err != nil {
		return before, false, err
	}
	ips, err := s.alloc.Allocate(k, reqs)
	freed := slices.ContainsFunc(before, func(ip netip.Addr) bool { return !slices.Contains(ips, ip) })
	return ips, freed, err
}

func (s poolSource) release(k string) bool {
	freed := s.alloc.Release(k)
	if len(freed) > 0 {
		klog.V(2).InfoS("Released load balancer IPs", "service", k, "ips", freed)
	}
	return len(freed) > 0
}

func (s poolSource) assigned(k string) []netip.Addr { return s.alloc.Assigned(k) }

func (s poolSource) rebuild(svcs []*corev1.Service) {
	as := make([]Assignment, 0, len(svcs))
	for _, svc := range svcs {
		as = append(as, Assignment{Owner: key(svc), IPs: ingressIPs(svc)})
	}
	for _, r := range s.alloc.Rebuild(as) {
		klog.InfoS("Address in a Service's status not kept; it will get another", "service", r.Owner, "ips", r.IPs)
	}
}

// nodeSource gives every Service the addresses of the nodes, as k3s's
// ServiceLB does, and each port of the nodes to one Service at a time.
type nodeSource struct {
	nodes  corelisters.NodeLister
	slices discoverylisters.EndpointSliceLister
	ports  *Ports

	mu   sync.Mutex
	last map[string][]netip.Addr
}

func newNodeSource(nodes corelisters.NodeLister, slices discoverylisters.EndpointSliceLister, reserved []ReservedPort) *nodeSource {
	return &nodeSource{nodes: nodes, slices: slices, ports: NewPorts(reserved...), last: map[string][]netip.Addr{}}
}

func (s *nodeSource) assign(k string, svc *corev1.Service) ([]netip.Addr, bool, error) {
	freed, err := s.ports.Claim(k, nodePorts(svc))
	if err != nil {
		s.setLast(k, nil)
		return nil, freed, err
	}
	nodes, err := s.usableNodes(svc)
	if err != nil {
		return s.assigned(k), freed, err
	}
	families := serviceFamilies(svc)
	ips := ofFamilies(NodeAddresses(nodes), families)
	if len(ips) == 0 {
		// The Service keeps its ports, to have them again once a node
		// is back.
		s.setLast(k, nil)
		err := fmt.Errorf("%w of the Service's IP families %v", ErrNoNodeAddress, families)
		if local(svc) {
			err = fmt.Errorf("%w (externalTrafficPolicy Local: only nodes with a ready endpoint count)", err)
		}
		return nil, freed, err
	}
	s.setLast(k, ips)
	return ips, freed, nil
}

// usableNodes returns the nodes whose addresses svc may get: all, or for
// externalTrafficPolicy Local those with a ready endpoint of svc, as k3s
// does, since the proxy drops external traffic on the others.
func (s *nodeSource) usableNodes(svc *corev1.Service) ([]*corev1.Node, error) {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil || !local(svc) {
		return nodes, err
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	eps, err := s.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	hosting := map[string]bool{}
	for _, slice := range eps {
		for _, ep := range slice.Endpoints {
			// A nil ready condition means ready, as the API says.
			if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				hosting[*ep.NodeName] = true
			}
		}
	}
	return slices.DeleteFunc(nodes, func(n *corev1.Node) bool { return !hosting[n.Name] }), nil
}

// local reports whether svc keeps external traffic on the node it
// arrives at.
func local(svc *corev1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func (s *nodeSource) release(k string) bool {
	s.setLast(k, nil)
	return s.ports.Release(k)
}

func (s *nodeSource) assigned(k string) []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.last[k])
}

func (s *nodeSource) setLast(k string, ips []netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ips) == 0 {
		delete(s.last, k)
		return
	}
	s.last[k] = ips
}

// rebuild gives the ports back to the Services that show addresses, which
// held them before the restart; a Service pending then claims its ports
// only when it is synced, after them.
func (s *nodeSource) rebuild(svcs []*corev1.Service) {
	for _, svc := range svcs {
		ips := ingressIPs(svc)
		if len(ips) == 0 {
			continue
		}
		k := key(svc)
		if _, err := s.ports.Claim(k, nodePorts(svc)); err != nil {
			klog.InfoS("Service shows node addresses but another holds its port; it waits", "service", k, "err", err)
			continue
		}
		s.setLast(k, ips)
	}
}

// NodeAddresses returns the addresses LoadBalancer Services get from
// nodes, as k3s's ServiceLB picks them: of the nodes that are Ready,
// schedulable and not labelled node.kubernetes.io/exclude-from-external-load-balancers,
// the addresses nodeaddr.Preferred picks (ExternalIP if any node has one,
// else InternalIP); sorted, without duplicates.
func NodeAddresses(nodes []*corev1.Node) []netip.Addr {
	return nodeaddr.Preferred(slices.DeleteFunc(slices.Clone(nodes), func(n *corev1.Node) bool { return !usable(n) })...)
}

// usable reports whether a node's addresses serve LoadBalancer Services.
func usable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	if _, ok := n.Labels[LabelExcludeFromLB]; ok {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ofFamilies returns the addresses of ips in the order of families.
func ofFamilies(ips []netip.Addr, families []corev1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, f := range families {
		for _, ip := range ips {
			if familyOf(ip) == f {
				out = append(out, ip)
			}
		}
	}
	return out
}
