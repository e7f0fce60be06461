package endpointslice

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/controller/internal/podutil"
)

// ControllerName is the value of the managed-by label on every slice this
// controller writes; slices with any other value are left alone.
const ControllerName = "endpointslice-controller.k8s.io"

// includePod reports whether pod belongs in a Service's slices at all.
// Terminal pods never do; terminating pods do (with terminating=true), as
// upstream's ShouldPodBeInEndpoints(pod, includeTerminating=true) decides.
func includePod(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0
}

// podToEndpoint builds the endpoint for pod in a slice of family. zone is
// the zone of the pod's Node ("" when unknown). The endpoint has no
// addresses when the pod has none of that family.
func podToEndpoint(pod *corev1.Pod, zone string, svc *corev1.Service, family discovery.AddressType) discovery.Endpoint {
	serving := podutil.IsReady(pod)
	terminating := pod.DeletionTimestamp != nil
	// Ready is never true for a terminating pod unless the Service publishes
	// not-ready addresses: older consumers only look at ready.
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discovery.Endpoint{
		Addresses: podAddresses(pod, family),
		Conditions: discovery.EndpointConditions{
			Ready:       &ready,
			Serving:     &serving,
			Terminating: &terminating,
		},
		TargetRef: &corev1.ObjectReference{
			Kind:      "Pod",
			Namespace: pod.Namespace,
			Name:      pod.Name,
			UID:       pod.UID,
		},
	}
	if pod.Spec.NodeName != "" {
		ep.NodeName = new(pod.Spec.NodeName)
	}
	if zone != "" {
		ep.Zone = new(zone)
	}
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		ep.Hostname = new(pod.Spec.Hostname)
	}
	return ep
}

// podAddresses returns the pod's IPs of family in canonical form.
func podAddresses(pod *corev1.Pod, family discovery.AddressType) []string {
	ips := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	var out []string
	for _, s := range ips {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		// An IPv4-mapped IPv6 address is an IPv4 address, as net.IP sees it.
		addr = addr.Unmap()
		if addressType(addr) == family {
			out = append(out, addr.String())
		}
	}
	return out
}

func addressType(addr netip.Addr) discovery.AddressType {
	if addr.Is4() {
		return discovery.AddressTypeIPv4
	}
	return discovery.AddressTypeIPv6
}

// endpointPorts resolves the Service's ports against pod. A named targetPort
// is looked up by name and protocol in the pod's containers (and restartable
// init containers, i.e. sidecars); a port that does not resolve is left out,
// so pods that disagree on a named port end up in different slices.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discovery.EndpointPort {
	ports := []discovery.EndpointPort{}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, ok := podutil.FindPort(pod, sp)
		if !ok {
			continue
		}
		ports = append(ports, discovery.EndpointPort{
			Name:        new(sp.Name),
			Port:        new(num),
			Protocol:    new(sp.Protocol),
			AppProtocol: sp.AppProtocol,
		})
	}
	return ports
}

// portsKey identifies a set of ports regardless of their order.
func portsKey(ports []discovery.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s/%s/%d/%s", deref(p.Name), deref(p.Protocol), deref(p.Port), deref(p.AppProtocol)))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// endpointKey is an endpoint's identity: addresses, hostname and the pod it
// stands for. Conditions, node and zone are not part of it, so a change to
// them updates the endpoint in place instead of moving it.
func endpointKey(ep *discovery.Endpoint) string {
	addrs := slices.Clone(ep.Addresses)
	slices.Sort(addrs)
	var ns, name string
	if ep.TargetRef != nil {
		ns, name = ep.TargetRef.Namespace, ep.TargetRef.Name
	}
	return strings.Join(addrs, ",") + "|" + deref(ep.Hostname) + "|" + ns + "/" + name
}

// sliceLabels returns the labels a slice of svc carries: the Service's own
// labels except the reserved ones, the headless marker, the service name and
// the managed-by value.
func sliceLabels(svc *corev1.Service) map[string]string {
	labels := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		if !reservedLabel(k) {
			labels[k] = v
		}
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		labels[corev1.IsHeadlessService] = ""
	}
	labels[discovery.LabelServiceName] = svc.Name
	labels[discovery.LabelManagedBy] = ControllerName
	return labels
}

func reservedLabel(k string) bool {
	return k == discovery.LabelServiceName || k == discovery.LabelManagedBy || k == corev1.IsHeadlessService
}

// newSlice returns an empty slice of svc for ports and family, to be created
// under a generated name.
func newSlice(svc *corev1.Service, ports []discovery.EndpointPort, family discovery.AddressType) *discovery.EndpointSlice {
	owner := metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))
	if ports == nil {
		ports = []discovery.EndpointPort{}
	}
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       svc.Namespace,
			GenerateName:    slicePrefix(svc.Name),
			Labels:          sliceLabels(svc),
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		AddressType: family,
		Ports:       ports,
		Endpoints:   []discovery.Endpoint{},
	}
}

// slicePrefix is "<service>-" unless that is not a valid name prefix (too
// long), then the service name alone.
func slicePrefix(service string) string {
	prefix := service + "-"
	if len(apimachineryvalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return service
	}
	return prefix
}

// ownedBy reports whether slice's owner references name svc (by UID).
func ownedBy(slice *discovery.EndpointSlice, svc *corev1.Service) bool {
	for _, o := range slice.OwnerReferences {
		if o.UID == svc.UID && o.Kind == "Service" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// serviceFamilies returns the address types svc's slices have. Without
// ipFamilies (an object from an old API server) the family follows the
// cluster IP, and a headless Service gets both, as upstream does.
func serviceFamilies(svc *corev1.Service) []discovery.AddressType {
	var out []discovery.AddressType
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out = appendFamily(out, discovery.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			out = appendFamily(out, discovery.AddressTypeIPv6)
		}
	}
	if len(out) > 0 {
		return out
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if addr, err := netip.ParseAddr(ip); err == nil && addr.Is6() && !addr.Is4In6() {
			return []discovery.AddressType{discovery.AddressTypeIPv6}
		}
		return []discovery.AddressType{discovery.AddressTypeIPv4}
	}
	return []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6}
}

func appendFamily(list []discovery.AddressType, f discovery.AddressType) []discovery.AddressType {
	if slices.Contains(list, f) {
		return list
	}
	return append(list, f)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
