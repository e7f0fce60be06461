package endpointslice

import (
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// DefaultMaxEndpointsPerSlice is the number of endpoints a slice holds
// unless Options say otherwise, as in upstream's kube-controller-manager.
const DefaultMaxEndpointsPerSlice = 100

// maxEndpointsLimit is the API's validation limit on endpoints per slice.
const maxEndpointsLimit = 1000

// reconcileInput is everything one reconcile looks at.
type reconcileInput struct {
	service *corev1.Service
	// pods are the Pods the Service's selector matches, in any state.
	pods []*corev1.Pod
	// nodes is the Node snapshot; Pods on unknown Nodes are skipped.
	nodes *topology
	// slices are the existing slices labelled for this Service and managed
	// by this controller, without those already being deleted.
	slices       []*discovery.EndpointSlice
	maxEndpoints int
	// triggerTime goes into the last-change-trigger-time annotation of
	// every slice written; zero removes it.
	triggerTime time.Time
}

// plan is what reconcile decides. Slices in create have no name (they use
// generateName); slices in update are copies, never cache objects.
type plan struct {
	create, update, delete []*discovery.EndpointSlice
	// desired counts the endpoints the Service should have, all families.
	desired int
	// missingNodes names Pods left out because their Node is unknown; the
	// caller retries later, when the Node may have appeared.
	missingNodes []string
	// hintsOff says why Auto topology hints were withheld, for the log.
	hintsOff []string
}

// reconcile compares the endpoints the Service's Pods call for with the
// existing slices and returns the writes that make the slices match, one
// set of slices per address family and per distinct set of resolved ports.
func reconcile(in reconcileInput) plan {
	if in.maxEndpoints <= 0 {
		in.maxEndpoints = DefaultMaxEndpointsPerSlice
	}
	families := serviceFamilies(in.service)
	byFamily := map[discovery.AddressType][]*discovery.EndpointSlice{}
	var p plan
	for _, s := range in.slices {
		if !slices.Contains(families, s.AddressType) {
			p.delete = append(p.delete, s)
			continue
		}
		byFamily[s.AddressType] = append(byFamily[s.AddressType], s)
	}
	for _, f := range families {
		fp := reconcileFamily(in, f, byFamily[f])
		p.create = append(p.create, fp.create...)
		p.update = append(p.update, fp.update...)
		p.delete = append(p.delete, fp.delete...)
		p.desired += fp.desired
		p.hintsOff = append(p.hintsOff, fp.hintsOff...)
		for _, name := range fp.missingNodes {
			if !slices.Contains(p.missingNodes, name) {
				p.missingNodes = append(p.missingNodes, name)
			}
		}
	}
	return p
}

// reconcileFamily is reconcile for the slices of one address family.
func reconcileFamily(in reconcileInput, family discovery.AddressType, existing []*discovery.EndpointSlice) plan {
	var fp plan
	owned := map[string][]*discovery.EndpointSlice{}
	for _, s := range sortedByName(existing) {
		// A slice of an earlier Service of the same name goes away.
		if !ownedBy(s, in.service) {
			fp.delete = append(fp.delete, s)
			continue
		}
		k := portsKey(s.Ports)
		owned[k] = append(owned[k], s)
	}
	groups, missing := desiredGroups(in, family)
	fp.missingNodes = missing
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		fp.desired += len(groups[k].endpoints)
		c, u, d := packGroup(in, family, owned[k], groups[k])
		fp.create = append(fp.create, c...)
		fp.update = append(fp.update, u...)
		fp.delete = append(fp.delete, d...)
	}
	for _, k := range slices.Sorted(maps.Keys(owned)) {
		if _, ok := groups[k]; !ok {
			fp.delete = append(fp.delete, owned[k]...)
		}
	}
	addPlaceholder(&fp, in.service, family, existing)
	unchanged := unchangedSlices(existing, fp.update, fp.delete)
	var off string
	fp.create, fp.update, off = applyHints(in.service, in.nodes, fp.create, fp.update, unchanged)
	if off != "" {
		fp.hintsOff = append(fp.hintsOff, string(family)+": "+off)
	}
	fp.create, fp.update, fp.delete = reuseDeleted(in.service, fp.create, fp.update, fp.delete)
	fp.update = dropUnchanged(fp.update, existing)
	stamp(fp.create, in.triggerTime)
	stamp(fp.update, in.triggerTime)
	return fp
}

// endpointGroup is the desired endpoints that share one set of ports.
type endpointGroup struct {
	ports     []discovery.EndpointPort
	endpoints map[string]discovery.Endpoint // by endpointKey
}

// desiredGroups turns the Pods into endpoints of family, grouped by their
// resolved ports. It also returns the Pods skipped for an unknown Node.
func desiredGroups(in reconcileInput, family discovery.AddressType) (map[string]*endpointGroup, []string) {
	groups := map[string]*endpointGroup{}
	var missing []string
	for _, pod := range in.pods {
		if !includePod(pod) {
			continue
		}
		zone, known := in.nodes.node(pod.Spec.NodeName)
		// A Pod on a Node we don't know is left out until the Node shows up
		// (or the Pod is collected), unless the user asked for every
		// address to be published.
		if !known && !in.service.Spec.PublishNotReadyAddresses {
			missing = append(missing, pod.Name)
			continue
		}
		ep := podToEndpoint(pod, zone, in.service, family)
		if len(ep.Addresses) == 0 {
			continue
		}
		ports := endpointPorts(in.service, pod)
		k := portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &endpointGroup{ports: ports, endpoints: map[string]discovery.Endpoint{}}
			groups[k] = g
		}
		g.endpoints[endpointKey(&ep)] = ep
	}
	return groups, missing
}

// packGroup places one group's endpoints into its existing slices as
// upstream's reconciler does, so that little is rewritten:
//  1. each existing slice keeps the endpoints still desired (updated in
//     place); a slice that changed is marked for update, one left empty for
//     deletion;
//  2. new endpoints go first into the slices already being updated, fullest
//     first;
//  3. what is left goes into the unchanged slice that it fills most nearly
//     (only if it fits in one), else into new slices.
func packGroup(in reconcileInput, family discovery.AddressType, existing []*discovery.EndpointSlice, g *endpointGroup) (create, update, del []*discovery.EndpointSlice) {
	labels := sliceLabels(in.service)
	remaining := g.endpoints
	var unchanged []*discovery.EndpointSlice
	for _, s := range existing {
		kept, changed := keepDesired(s, remaining)
		labelsChanged := !maps.Equal(s.Labels, labels)
		switch {
		case changed && len(kept) == 0:
			del = append(del, s)
		case changed || labelsChanged:
			c := s.DeepCopy()
			if changed {
				c.Endpoints = kept
			}
			c.Labels = labels
			update = append(update, c)
		default:
			unchanged = append(unchanged, s)
		}
	}
	keys := slices.Sorted(maps.Keys(remaining))
	slices.SortStableFunc(update, func(a, b *discovery.EndpointSlice) int { return len(b.Endpoints) - len(a.Endpoints) })
	for _, s := range update {
		keys = fill(s, keys, remaining, in.maxEndpoints)
	}
	for len(keys) > 0 {
		var s *discovery.EndpointSlice
		if len(keys) < in.maxEndpoints {
			if i := sliceToFill(unchanged, len(keys), in.maxEndpoints); i >= 0 {
				s = unchanged[i].DeepCopy()
				unchanged = slices.Delete(unchanged, i, i+1)
				update = append(update, s)
			}
		}
		if s == nil {
			s = newSlice(in.service, g.ports, family)
			create = append(create, s)
		}
		keys = fill(s, keys, remaining, in.maxEndpoints)
	}
	return create, update, del
}

// keepDesired returns the endpoints of s that are still desired, in their
// desired form, and removes them from desired. changed is true when any
// endpoint was dropped or differs from its desired form.
func keepDesired(s *discovery.EndpointSlice, desired map[string]discovery.Endpoint) (kept []discovery.Endpoint, changed bool) {
	for i := range s.Endpoints {
		k := endpointKey(&s.Endpoints[i])
		want, ok := desired[k]
		if !ok {
			changed = true
			continue
		}
		delete(desired, k)
		kept = append(kept, want)
		if !sameEndpoint(&want, &s.Endpoints[i]) {
			changed = true
		}
	}
	return kept, changed
}

// sameEndpoint compares what endpointKey leaves out, except hints, which
// applyHints owns.
func sameEndpoint(a, b *discovery.Endpoint) bool {
	if deref(a.NodeName) != deref(b.NodeName) || (a.NodeName == nil) != (b.NodeName == nil) {
		return false
	}
	if deref(a.Zone) != deref(b.Zone) || (a.Zone == nil) != (b.Zone == nil) {
		return false
	}
	if !boolPtrEqual(a.Conditions.Ready, b.Conditions.Ready) ||
		!boolPtrEqual(a.Conditions.Serving, b.Conditions.Serving) ||
		!boolPtrEqual(a.Conditions.Terminating, b.Conditions.Terminating) {
		return false
	}
	if (a.TargetRef == nil) != (b.TargetRef == nil) {
		return false
	}
	if a.TargetRef == nil {
		return true
	}
	ra, rb := *a.TargetRef, *b.TargetRef
	ra.ResourceVersion, rb.ResourceVersion = "", ""
	return ra == rb
}

func boolPtrEqual(a, b *bool) bool {
	return (a == nil) == (b == nil) && deref(a) == deref(b)
}

// fill moves endpoints named by keys into s until it is full and returns
// the keys not placed.
func fill(s *discovery.EndpointSlice, keys []string, desired map[string]discovery.Endpoint, max int) []string {
	for len(keys) > 0 && len(s.Endpoints) < max {
		s.Endpoints = append(s.Endpoints, desired[keys[0]])
		delete(desired, keys[0])
		keys = keys[1:]
	}
	return keys
}

// sliceToFill returns the index of the slice that n more endpoints fill most
// nearly without overflowing, or -1.
func sliceToFill(candidates []*discovery.EndpointSlice, n, max int) int {
	best, bestGap := -1, max
	for i, s := range candidates {
		gap := max - n - len(s.Endpoints)
		if gap >= 0 && gap < bestGap {
			best, bestGap = i, gap
			if gap == 0 {
				break
			}
		}
	}
	return best
}

// addPlaceholder keeps one empty slice for a Service with no endpoints of
// this family, as upstream does, so that consumers can tell "no endpoints"
// from "not yet processed". An existing placeholder is kept as it is.
func addPlaceholder(fp *plan, svc *corev1.Service, family discovery.AddressType, existing []*discovery.EndpointSlice) {
	if len(existing) != len(fp.delete) || len(fp.create) > 0 {
		return
	}
	ph := newSlice(svc, nil, family)
	if len(fp.delete) == 1 && sameContent(fp.delete[0], ph) {
		fp.delete = nil
		return
	}
	fp.create = append(fp.create, ph)
}

// unchangedSlices returns the existing slices not being updated or deleted.
func unchangedSlices(existing, update, del []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	touched := map[string]bool{}
	for _, s := range update {
		touched[s.Name] = true
	}
	for _, s := range del {
		touched[s.Name] = true
	}
	var out []*discovery.EndpointSlice
	for _, s := range sortedByName(existing) {
		if !touched[s.Name] {
			out = append(out, s)
		}
	}
	return out
}

// reuseDeleted turns a create plus a delete into one update of the slice
// that would be deleted: one write instead of two, and no moment with the
// endpoints in neither. Only slices this Service owns are reused, so a
// slice of an earlier Service of the same name is never adopted.
func reuseDeleted(svc *corev1.Service, create, update, del []*discovery.EndpointSlice) (c, u, d []*discovery.EndpointSlice) {
	for i := 0; i < len(del) && len(create) > 0; {
		old, s := del[i], create[len(create)-1]
		if old.AddressType != s.AddressType || !ownedBy(old, svc) {
			i++
			continue
		}
		s.Name = old.Name
		s.ResourceVersion = old.ResourceVersion
		s.Annotations = maps.Clone(old.Annotations)
		create = create[:len(create)-1]
		update = append(update, s)
		del = slices.Delete(del, i, i+1)
	}
	return create, update, del
}

// dropUnchanged removes updates whose content equals the stored slice.
func dropUnchanged(update, existing []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	byName := make(map[string]*discovery.EndpointSlice, len(existing))
	for _, s := range existing {
		byName[s.Name] = s
	}
	return slices.DeleteFunc(update, func(s *discovery.EndpointSlice) bool {
		old, ok := byName[s.Name]
		return ok && sameContent(old, s)
	})
}

// sameContent compares everything this controller writes except names and
// annotations: a write that changes only the trigger time is not made.
func sameContent(a, b *discovery.EndpointSlice) bool {
	return a.AddressType == b.AddressType &&
		portsKey(a.Ports) == portsKey(b.Ports) &&
		maps.Equal(a.Labels, b.Labels) &&
		apiequality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		apiequality.Semantic.DeepEqual(a.Endpoints, b.Endpoints)
}

// stamp sets (or, for a zero time, removes) the last-change-trigger-time
// annotation, which starts the proxies' network-programming-latency clock.
func stamp(list []*discovery.EndpointSlice, t time.Time) {
	for _, s := range list {
		if t.IsZero() {
			delete(s.Annotations, corev1.EndpointsLastChangeTriggerTime)
			continue
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[corev1.EndpointsLastChangeTriggerTime] = t.UTC().Format(time.RFC3339Nano)
	}
}

func sortedByName(list []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	out := slices.Clone(list)
	slices.SortFunc(out, func(a, b *discovery.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}
