package endpoints

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/controller/internal/podutil"
)

// Subsets returns the repacked subsets of the Endpoints for svc, given the
// pods its selector matches. Pods that should not be listed (see
// [ShouldPodBeInEndpoints]), pods without an IP of the Service's primary
// family and ports a pod cannot serve are left out. With
// publishNotReadyAddresses every listed pod is in Addresses; otherwise pods
// that are not Ready go to NotReadyAddresses.
func Subsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	r := newRepacker()
	for _, pod := range pods {
		if !ShouldPodBeInEndpoints(pod, svc.Spec.PublishNotReadyAddresses) {
			continue
		}
		addr, ok := podAddress(svc, pod)
		if !ok {
			continue
		}
		ready := svc.Spec.PublishNotReadyAddresses || podutil.IsReady(pod)
		for _, pk := range podPorts(svc, pod) {
			// addr is built for this call alone, so the repacker keeps it
			// without a copy.
			r.put(pk, &addr, ready, false)
		}
	}
	return r.subsets()
}

// ShouldPodBeInEndpoints reports whether pod belongs in an Endpoints (or
// EndpointSlice) at all: it must not be terminal (Succeeded or Failed), it
// must have an IP, and it must not be terminating unless includeTerminating
// is set (Services with publishNotReadyAddresses set it).
func ShouldPodBeInEndpoints(pod *corev1.Pod, includeTerminating bool) bool {
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return false
	case pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0:
		return false
	case pod.DeletionTimestamp != nil && !includeTerminating:
		return false
	}
	return true
}

// podPorts returns the Service ports the pod serves, resolved against it.
// A headless Service without ports still lists its pods (DNS answers for
// them), under no port.
func podPorts(svc *corev1.Service, pod *corev1.Pod) []portKey {
	if len(svc.Spec.Ports) == 0 {
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return []portKey{{noPorts: true}}
		}
		return nil
	}
	out := make([]portKey, 0, len(svc.Spec.Ports))
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		port, ok := podutil.FindPort(pod, sp)
		if !ok {
			continue
		}
		out = append(out, portKeyOf(corev1.EndpointPort{Name: sp.Name, Port: port, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol}))
	}
	return out
}

// podAddress returns the pod's address in the Service's primary IP family,
// with node name, hostname and a reference to the pod.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	want6 := serviceWantsIPv6(svc, pod)
	for _, ip := range podIPs(pod) {
		a, err := netip.ParseAddr(ip)
		if err != nil || a.Unmap().Is6() != want6 {
			continue
		}
		nodeName := pod.Spec.NodeName
		addr := corev1.EndpointAddress{
			IP:       ip,
			NodeName: &nodeName,
			TargetRef: &corev1.ObjectReference{
				Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			},
		}
		if shouldSetHostname(pod, svc) {
			addr.Hostname = pod.Spec.Hostname
		}
		return addr, true
	}
	return corev1.EndpointAddress{}, false
}

// serviceWantsIPv6 tells the family of the Service's endpoints: its first
// IP family, or, for Services written before families were defaulted, the
// family of its cluster IP or (headless) of the pod's primary IP.
func serviceWantsIPv6(svc *corev1.Service, pod *corev1.Pod) bool {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	}
	ip := pod.Status.PodIP
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		ip = svc.Spec.ClusterIP
	}
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Unmap().Is6()
}

func podIPs(pod *corev1.Pod) []string {
	if len(pod.Status.PodIPs) == 0 {
		return []string{pod.Status.PodIP}
	}
	ips := make([]string, len(pod.Status.PodIPs))
	for i, p := range pod.Status.PodIPs {
		ips[i] = p.IP
	}
	return ips
}

// shouldSetHostname: a pod gets a DNS name under a headless Service only
// when its subdomain names that Service.
func shouldSetHostname(pod *corev1.Pod, svc *corev1.Service) bool {
	return pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace
}
