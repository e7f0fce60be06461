package mirroring

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"portal.dev/portal/controller/endpoints"
)

const (
	// ControllerName is the endpointslice.kubernetes.io/managed-by value
	// of mirrored EndpointSlices (upstream's).
	ControllerName = "endpointslicemirroring-controller.k8s.io"

	// DefaultMaxEndpointsPerSubset is how many addresses of one Endpoints
	// subset are mirrored at most (kube-controller-manager's
	// --mirroring-max-endpoints-per-subset default).
	DefaultMaxEndpointsPerSubset = 1000
)

// ShouldMirror reports whether ep may be mirrored at all: not when it is
// labelled endpointslice.kubernetes.io/skip-mirror=true (the API server
// labels default/kubernetes so) or is a leader-election lock. Whether its
// Service exists and has no selector is checked separately.
func ShouldMirror(ep *corev1.Endpoints) bool {
	if ep == nil || ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, lock := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !lock
}

// Skipped counts the addresses of an Endpoints that were not mirrored.
type Skipped struct {
	// InvalidIP counts addresses whose IP does not parse.
	InvalidIP int
	// OverLimit counts addresses beyond the per-subset maximum.
	OverLimit int
}

// Desired returns the EndpointSlices that mirror ep: after repacking its
// subsets, one slice per address family and set of ports, holding at most
// maxPerSubset addresses of each subset (ready ones first). Addresses
// become endpoints with ready=true, notReadyAddresses ready=false. Slices
// carry ep's labels and annotations (but the trigger time and
// last-applied configuration), the service-name and managed-by labels and
// a controller reference to ep. They have a GenerateName, no Name, and are
// sorted by address family and ports.
func Desired(ep *corev1.Endpoints, maxPerSubset int) ([]*discoveryv1.EndpointSlice, Skipped) {
	b := builder{ep: ep, max: maxPerSubset, byKey: map[string]*discoveryv1.EndpointSlice{}}
	for _, s := range endpoints.Repack(ep.Subsets) {
		b.addSubset(s)
	}
	return b.slices(), b.skipped
}

type builder struct {
	ep      *corev1.Endpoints
	max     int
	byKey   map[string]*discoveryv1.EndpointSlice
	skipped Skipped
}

func (b *builder) addSubset(s corev1.EndpointSubset) {
	ports := slicePorts(s.Ports)
	added := 0
	add := func(addrs []corev1.EndpointAddress, ready bool) {
		for _, a := range addrs {
			if added >= b.max {
				b.skipped.OverLimit++
				continue
			}
			e, family, ok := toEndpoint(a, ready)
			if !ok {
				b.skipped.InvalidIP++
				continue
			}
			slice := b.slice(family, ports)
			slice.Endpoints = append(slice.Endpoints, e)
			added++
		}
	}
	add(s.Addresses, true)
	add(s.NotReadyAddresses, false)
}

func (b *builder) slice(family discoveryv1.AddressType, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	key := keyOf(family, ports)
	if s, ok := b.byKey[key]; ok {
		return s
	}
	s := newSlice(b.ep, family, ports)
	b.byKey[key] = s
	return s
}

func (b *builder) slices() []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(b.byKey))
	for _, k := range slices.Sorted(maps.Keys(b.byKey)) {
		s := b.byKey[k]
		slices.SortFunc(s.Endpoints, compareEndpoints)
		out = append(out, s)
	}
	return out
}

func newSlice(ep *corev1.Endpoints, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	labels := maps.Clone(ep.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[discoveryv1.LabelServiceName] = ep.Name
	labels[discoveryv1.LabelManagedBy] = ControllerName
	annotations := maps.Clone(ep.Annotations)
	delete(annotations, corev1.EndpointsLastChangeTriggerTime)
	delete(annotations, corev1.LastAppliedConfigAnnotation)
	if len(annotations) == 0 {
		annotations = nil
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ep.Namespace,
			GenerateName:    ep.Name + "-",
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(ep)},
		},
		AddressType: family,
		Ports:       ports,
	}
}

// ownerRef makes the Endpoints the controller of its slices, so that the
// garbage collector removes them with it even if this controller is down.
func ownerRef(ep *corev1.Endpoints) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "v1", Kind: "Endpoints", Name: ep.Name, UID: ep.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// toEndpoint converts an address; the IP is parsed and printed again so
// that odd spellings (::ffff:10.0.0.1, upper-case IPv6) become canonical.
func toEndpoint(a corev1.EndpointAddress, ready bool) (discoveryv1.Endpoint, discoveryv1.AddressType, bool) {
	ip, err := netip.ParseAddr(a.IP)
	if err != nil || ip.Zone() != "" {
		return discoveryv1.Endpoint{}, "", false
	}
	ip = ip.Unmap()
	family := discoveryv1.AddressTypeIPv4
	if ip.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
		TargetRef:  a.TargetRef.DeepCopy(),
	}
	if a.NodeName != nil {
		e.NodeName = ptr.To(*a.NodeName)
	}
	if a.Hostname != "" {
		e.Hostname = ptr.To(a.Hostname)
	}
	return e, family, true
}

func slicePorts(ports []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		var app *string
		if p.AppProtocol != nil {
			app = ptr.To(*p.AppProtocol)
		}
		out = append(out, discoveryv1.EndpointPort{
			Name: ptr.To(p.Name), Port: ptr.To(p.Port), Protocol: ptr.To(p.Protocol), AppProtocol: app,
		})
	}
	return out
}

// keyOf identifies the slice an endpoint belongs in: its address family
// and its set of ports, whatever their order.
func keyOf(family discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	parts := make([]string, len(ports))
	for i, p := range ports {
		parts[i] = fmt.Sprintf("%s:%d/%s/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0),
			ptr.Deref(p.Protocol, ""), ptr.Deref(p.AppProtocol, ""))
	}
	slices.Sort(parts)
	return string(family) + "|" + strings.Join(parts, ",")
}

// compareEndpoints orders endpoints by address, then by target UID.
func compareEndpoints(a, b discoveryv1.Endpoint) int {
	ia, _ := netip.ParseAddr(firstAddress(a))
	ib, _ := netip.ParseAddr(firstAddress(b))
	return cmp.Or(ia.Compare(ib), strings.Compare(targetUID(a), targetUID(b)))
}

func firstAddress(e discoveryv1.Endpoint) string {
	if len(e.Addresses) == 0 {
		return ""
	}
	return e.Addresses[0]
}

func targetUID(e discoveryv1.Endpoint) string {
	if e.TargetRef == nil {
		return ""
	}
	return string(e.TargetRef.UID)
}
