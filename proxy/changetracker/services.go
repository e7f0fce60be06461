// Package changetracker turns informer events into proxy snapshots. It
// keeps, per Service, the state before the first unapplied change and the
// latest state, drops changes that cancel out, and applies everything
// pending as one batch that says which Services changed (the split
// kube-proxy's change trackers use). It owns no client and no informer:
// the caller feeds it events and asks for the next snapshot. It must not
// touch the kernel or the network.
package changetracker

import (
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// ServiceTracker accumulates Service changes between syncs. The zero
// value is ready to use.
type ServiceTracker struct {
	mu    sync.Mutex
	items map[types.NamespacedName]*serviceChange
}

type serviceChange struct {
	previous, current *snapshot.Service
}

// Update records that the Service nn went from old to cur, in the form
// ServiceFromAPI gives (nil: absent, or nothing to proxy). It returns
// true when the Service now has a change pending; a change that undoes
// the earlier pending ones leaves nothing pending.
func (t *ServiceTracker) Update(nn types.NamespacedName, old, cur *snapshot.Service) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.items == nil {
		t.items = map[types.NamespacedName]*serviceChange{}
	}
	ch, ok := t.items[nn]
	if !ok {
		ch = &serviceChange{previous: old}
		t.items[nn] = ch
	}
	ch.current = cur
	if reflect.DeepEqual(ch.previous, ch.current) {
		delete(t.items, nn)
		return false
	}
	return true
}

// Pending returns how many Services have unapplied changes.
func (t *ServiceTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}

func (t *ServiceTracker) checkout() map[types.NamespacedName]*serviceChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	items := t.items
	t.items = nil
	return items
}

// ServiceFromAPI converts a Service to the proxy's view of it, or returns
// nil when the proxy has nothing to do for it: ExternalName and headless
// Services, and Services without a cluster IP.
func ServiceFromAPI(svc *v1.Service) *snapshot.Service {
	if svc == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	out := &snapshot.Service{Name: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			out.ClusterIPs = append(out.ClusterIPs, a.Unmap())
		}
	}
	if len(out.ClusterIPs) == 0 {
		return nil
	}
	out.ExternalIPs = parseAddrs(svc.Spec.ExternalIPs)
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP) {
				continue
			}
			if a, err := netip.ParseAddr(ing.IP); err == nil {
				out.LoadBalancerVIPs = append(out.LoadBalancerVIPs, a.Unmap())
			}
		}
		for _, r := range svc.Spec.LoadBalancerSourceRanges {
			// Validation has long let whitespace through; kube-proxy trims it too.
			if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil {
				out.SourceRanges = append(out.SourceRanges, p.Masked())
			}
		}
	}
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		timeout := int32(v1.DefaultClientIPServiceAffinitySeconds)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			timeout = *c.ClientIP.TimeoutSeconds
		}
		out.AffinityTimeout = time.Duration(timeout) * time.Second
	}
	externallyAccessible := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer || len(out.ExternalIPs) > 0
	out.ExternalPolicyLocal = externallyAccessible && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	out.InternalPolicyLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer && out.ExternalPolicyLocal {
		out.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
	}
	out.Scheduler = svc.Annotations[snapshot.SchedulerAnnotation]
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		port := snapshot.Port{Name: p.Name, Protocol: proto, Port: uint16(p.Port)}
		if svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			port.NodePort = uint16(p.NodePort)
		}
		out.Ports = append(out.Ports, port)
	}
	return out
}

func parseAddrs(in []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
