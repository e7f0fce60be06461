package servicelb

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrInvalidRequest marks a Service whose requested addresses make no
// sense (not addresses, two of a family, a family the Service lacks).
var ErrInvalidRequest = errors.New("invalid load balancer IP request")

// serviceFamilies returns the IP families of svc in its order: spec.ipFamilies,
// else those of its cluster IPs, else IPv4.
func serviceFamilies(svc *corev1.Service) []corev1.IPFamily {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies
	}
	var out []corev1.IPFamily
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, familyOf(a)) {
			out = append(out, familyOf(a))
		}
	}
	if len(out) == 0 {
		out = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	return out
}

// requestedIPs returns the addresses svc asks for: the annotation's list,
// else spec.loadBalancerIP. When both are set they must agree.
func requestedIPs(svc *corev1.Service) ([]netip.Addr, error) {
	var ips []netip.Addr
	if v, ok := svc.Annotations[AnnotationIPs]; ok {
		for s := range strings.SplitSeq(v, ",") {
			ip, err := parseAddr(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("%w: annotation %s: %q is not an IP address", ErrInvalidRequest, AnnotationIPs, strings.TrimSpace(s))
			}
			ips = append(ips, ip)
		}
	}
	if svc.Spec.LoadBalancerIP == "" {
		return ips, nil
	}
	ip, err := parseAddr(svc.Spec.LoadBalancerIP)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: spec.loadBalancerIP %q is not an IP address", ErrInvalidRequest, svc.Spec.LoadBalancerIP)
	case len(ips) > 0 && !slices.Contains(ips, ip):
		return nil, fmt.Errorf("%w: spec.loadBalancerIP %s is not among annotation %s", ErrInvalidRequest, ip, AnnotationIPs)
	case len(ips) > 0:
		return ips, nil
	}
	return []netip.Addr{ip}, nil
}

// requests turns svc into allocation requests, in the order of its
// families. Requested addresses, at most one per family of the Service,
// are exactly what it gets. Without any, it gets one address of each of
// its families that the pools serve; ErrNoPool when they serve none.
func requests(svc *corev1.Service, pools Pools) ([]Request, error) {
	families := serviceFamilies(svc)
	ips, err := requestedIPs(svc)
	if err != nil {
		return nil, err
	}
	if len(ips) > 0 {
		return explicitRequests(families, ips)
	}
	var reqs []Request
	for _, f := range families {
		if pools.Has(f) {
			reqs = append(reqs, Request{Family: f})
		}
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w for the Service's IP families %v", ErrNoPool, families)
	}
	return reqs, nil
}

func explicitRequests(families []corev1.IPFamily, ips []netip.Addr) ([]Request, error) {
	var reqs []Request
	for _, f := range families {
		var mine []netip.Addr
		for _, ip := range ips {
			if familyOf(ip) == f {
				mine = append(mine, ip)
			}
		}
		if len(mine) > 1 {
			return nil, fmt.Errorf("%w: %d %s addresses requested, at most one per family", ErrInvalidRequest, len(mine), f)
		}
		if len(mine) == 1 {
			reqs = append(reqs, Request{Family: f, IP: mine[0]})
		}
	}
	if len(reqs) < len(ips) {
		return nil, fmt.Errorf("%w: requested addresses %v include a family the Service does not have (%v)", ErrInvalidRequest, ips, families)
	}
	return reqs, nil
}
