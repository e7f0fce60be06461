package endpointslice

import (
	"fmt"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// overloadThreshold is how much more than its share of traffic any zone's
// endpoints may get under Auto hints (upstream's value).
const overloadThreshold = 0.2

// applyHints sets the topology hints of the slices being written, and moves
// unchanged slices whose hints are wrong into update. The topology-mode
// Auto annotation wins over spec.trafficDistribution, as upstream decides.
// off says why Auto hints were withheld ("" when they were not).
func applyHints(svc *corev1.Service, nodes *topology, create, update, unchanged []*discovery.EndpointSlice) (c, u []*discovery.EndpointSlice, off string) {
	if autoHintsEnabled(svc.Annotations) {
		return autoHints(nodes, create, update, unchanged)
	}
	if td := svc.Spec.TrafficDistribution; td != nil && preferClose(*td) {
		c, u = closeHints(*td == corev1.ServiceTrafficDistributionPreferSameNode, create, update, unchanged)
		return c, u, ""
	}
	c, u = removeHints(create, update, unchanged)
	return c, u, ""
}

// autoHintsEnabled reads the topology-mode annotation; the deprecated
// topology-aware-hints annotation, when present, takes precedence.
func autoHintsEnabled(annotations map[string]string) bool {
	v, ok := annotations[corev1.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		v = annotations[corev1.AnnotationTopologyMode]
	}
	return v == "Auto" || v == "auto"
}

func preferClose(td string) bool {
	switch td {
	case corev1.ServiceTrafficDistributionPreferClose,
		corev1.ServiceTrafficDistributionPreferSameZone,
		corev1.ServiceTrafficDistributionPreferSameNode:
		return true
	}
	return false
}

func endpointReady(ep *discovery.Endpoint) bool {
	return ep.Conditions.Ready != nil && *ep.Conditions.Ready
}

// removeHints clears every hint, rewriting unchanged slices that had any.
func removeHints(create, update, unchanged []*discovery.EndpointSlice) (c, u []*discovery.EndpointSlice) {
	for _, s := range slices.Concat(create, update) {
		for i := range s.Endpoints {
			s.Endpoints[i].Hints = nil
		}
	}
	for _, s := range unchanged {
		if !slices.ContainsFunc(s.Endpoints, func(ep discovery.Endpoint) bool { return ep.Hints != nil }) {
			continue
		}
		s = s.DeepCopy()
		for i := range s.Endpoints {
			s.Endpoints[i].Hints = nil
		}
		update = append(update, s)
	}
	return create, update
}

// closeHints implements trafficDistribution PreferClose/PreferSameZone (and
// PreferSameNode when sameNode): every ready endpoint is hinted for its own
// zone, and for its own node too with PreferSameNode.
func closeHints(sameNode bool, create, update, unchanged []*discovery.EndpointSlice) (c, u []*discovery.EndpointSlice) {
	for _, s := range unchanged {
		if !closeHintsRight(s, sameNode) {
			update = append(update, s.DeepCopy())
		}
	}
	for _, s := range slices.Concat(create, update) {
		for i := range s.Endpoints {
			s.Endpoints[i].Hints = closeHint(&s.Endpoints[i], sameNode)
		}
	}
	return create, update
}

// closeHint is the hint closeHints wants on ep; nil for a not-ready one.
func closeHint(ep *discovery.Endpoint, sameNode bool) *discovery.EndpointHints {
	if !endpointReady(ep) {
		return nil
	}
	var h discovery.EndpointHints
	if ep.Zone != nil {
		h.ForZones = []discovery.ForZone{{Name: *ep.Zone}}
	}
	if sameNode && ep.NodeName != nil {
		h.ForNodes = []discovery.ForNode{{Name: *ep.NodeName}}
	}
	if h.ForZones == nil && h.ForNodes == nil {
		return nil
	}
	return &h
}

// closeHintsRight reports whether every ready endpoint of s already has
// the hint closeHints would give it.
func closeHintsRight(s *discovery.EndpointSlice, sameNode bool) bool {
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		if !endpointReady(ep) {
			continue
		}
		want, got := closeHint(ep, sameNode), ep.Hints
		if (want == nil) != (got == nil) {
			return false
		}
		if want != nil && (!slices.Equal(want.ForZones, got.ForZones) || !slices.Equal(want.ForNodes, got.ForNodes)) {
			return false
		}
	}
	return true
}

// allocation is how many ready endpoints a zone should be hinted for.
type allocation struct {
	minimum, maximum int
	desired          float64
}

// allocations splits n ready endpoints across zones in proportion to
// their CPU, with every zone getting at least its share less the overload
// threshold. It returns nil and the reason when that can't be done.
func allocations(nodes *topology, n int) (map[string]allocation, string) {
	if nodes == nil || nodes.cpuRatios == nil {
		return nil, "insufficient node information: allocatable CPU or zone not specified on one or more nodes, or ready nodes in fewer than two zones"
	}
	if len(nodes.cpuRatios) > n {
		return nil, fmt.Sprintf("insufficient number of endpoints (%d endpoints, %d zones)", n, len(nodes.cpuRatios))
	}
	out := map[string]allocation{}
	minTotal := 0
	for _, zone := range slices.Sorted(maps.Keys(nodes.cpuRatios)) {
		desired := nodes.cpuRatios[zone] * float64(n)
		minimum := int(math.Ceil(desired / (1 + overloadThreshold)))
		out[zone] = allocation{minimum: minimum, desired: math.Max(desired, float64(minimum))}
		minTotal += minimum
		if minTotal > n {
			return nil, fmt.Sprintf("unable to allocate minimum required endpoints to each zone without exceeding overload threshold (%d endpoints, %d zones)", n, len(nodes.cpuRatios))
		}
	}
	for zone, a := range out {
		a.maximum = a.minimum + n - minTotal
		out[zone] = a
	}
	return out, ""
}

// autoHints implements topology-mode Auto as upstream's TopologyCache does:
// hint every ready endpoint for its own zone, then move hints from zones
// with more than their CPU share to zones with less. Any ready endpoint
// without a zone, or zones that can't be balanced, means no hints at all.
func autoHints(nodes *topology, create, update, unchanged []*discovery.EndpointSlice) (c, u []*discovery.EndpointSlice, off string) {
	alloc, off := allocations(nodes, readyCount(slices.Concat(create, update, unchanged)))
	if alloc == nil {
		c, u = removeHints(create, update, unchanged)
		return c, u, off
	}
	allocated, unchanged, update := claimUnchanged(alloc, unchanged, update)
	writable := slices.Concat(create, update)
	for _, s := range writable {
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			ep.Hints = nil
			if !endpointReady(ep) {
				continue
			}
			if deref(ep.Zone) == "" {
				c, u = removeHints(create, update, unchanged)
				return c, u, "one or more endpoints do not have a zone specified"
			}
			allocated[*ep.Zone]++
			ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: *ep.Zone}}}
		}
	}
	giving, receiving := givingAndReceiving(alloc, allocated)
	redistribute(writable, giving, receiving)
	return create, update, ""
}

func readyCount(list []*discovery.EndpointSlice) int {
	n := 0
	for _, s := range list {
		for i := range s.Endpoints {
			if endpointReady(&s.Endpoints[i]) {
				n++
			}
		}
	}
	return n
}

// claimUnchanged counts the hints of unchanged slices whose hints still fit
// the allocations, and moves the others into update to be re-hinted.
func claimUnchanged(alloc map[string]allocation, unchanged, update []*discovery.EndpointSlice) (map[string]int, []*discovery.EndpointSlice, []*discovery.EndpointSlice) {
	allocated := map[string]int{}
	var keep []*discovery.EndpointSlice
	for _, s := range unchanged {
		byZone := validZoneHints(s, allocated, alloc)
		if byZone == nil {
			update = append(update, s.DeepCopy())
			continue
		}
		keep = append(keep, s)
		for zone, n := range byZone {
			allocated[zone] += n
		}
	}
	return allocated, keep, update
}

// validZoneHints counts the zone hints of s's ready endpoints, or returns
// nil when they are not acceptable as they are: a ready endpoint without a
// zone hint, a node hint, a hint for a zone without an allocation, or more
// hints for a zone than its maximum.
func validZoneHints(s *discovery.EndpointSlice, allocated map[string]int, alloc map[string]allocation) map[string]int {
	byZone := map[string]int{}
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		if !endpointReady(ep) {
			continue
		}
		if ep.Hints == nil || len(ep.Hints.ForZones) == 0 || len(ep.Hints.ForNodes) > 0 {
			return nil
		}
		for _, z := range ep.Hints.ForZones {
			if _, ok := alloc[z.Name]; !ok {
				return nil
			}
			byZone[z.Name]++
		}
	}
	for zone, n := range byZone {
		if n+allocated[zone] > alloc[zone].maximum {
			return nil
		}
	}
	return byZone
}

// givingAndReceiving returns how many hints each zone over its desired
// allocation gives away and each zone under it receives, in whole
// endpoints.
func givingAndReceiving(alloc map[string]allocation, allocated map[string]int) (giving, receiving map[string]int) {
	give, recv := map[string]float64{}, map[string]float64{}
	for zone, a := range alloc {
		have := float64(allocated[zone])
		switch {
		case have > a.desired:
			give[zone] = have - a.desired
		case have < a.desired:
			recv[zone] = a.desired - have
		}
	}
	giving, receiving = map[string]int{}, map[string]int{}
	for {
		gz, g := most(give)
		rz, r := most(recv)
		if gz == "" || rz == "" || (g < 1 && r < 1) || g < 0.5 || r < 0.5 {
			return giving, receiving
		}
		giving[gz]++
		give[gz]--
		receiving[rz]++
		recv[rz]--
	}
}

// most returns the zone with the largest value (ties to the first by name).
func most(m map[string]float64) (string, float64) {
	zone, best := "", 0.0
	for _, z := range slices.Sorted(maps.Keys(m)) {
		if m[z] > best {
			zone, best = z, m[z]
		}
	}
	return zone, best
}

// redistribute re-hints endpoints of giving zones for receiving zones.
func redistribute(list []*discovery.EndpointSlice, giving, receiving map[string]int) {
	for _, s := range list {
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if len(giving) == 0 || len(receiving) == 0 {
				return
			}
			if !endpointReady(ep) || giving[deref(ep.Zone)] == 0 {
				continue
			}
			to := slices.Sorted(maps.Keys(receiving))[0]
			ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: to}}}
			decrement(giving, *ep.Zone)
			decrement(receiving, to)
		}
	}
}

func decrement(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}
