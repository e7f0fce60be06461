package changetracker

import (
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"
	"unique"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// EndpointsTracker accumulates EndpointSlice changes between syncs. It
// keeps the current slices of every Service (slim copies) and which
// Services have changed since the last snapshot; the merge into endpoints
// happens once per sync, not per event.
type EndpointsTracker struct {
	hostname string
	start    time.Time

	mu       sync.Mutex
	slices   map[types.NamespacedName]map[string]*Slice
	dirty    map[types.NamespacedName]struct{}
	triggers map[types.NamespacedName][]time.Time
}

// NewEndpointsTracker returns a tracker for the node named hostname.
// Trigger times older than start are ignored: they describe changes made
// before this proxy started, which it did not program late.
func NewEndpointsTracker(hostname string, start time.Time) *EndpointsTracker {
	return &EndpointsTracker{
		hostname: hostname,
		start:    start,
		slices:   map[types.NamespacedName]map[string]*Slice{},
		dirty:    map[types.NamespacedName]struct{}{},
		triggers: map[types.NamespacedName][]time.Time{},
	}
}

// Slice is the part of an EndpointSlice the proxy uses. The informer
// caches Slices instead of EndpointSlices (see TransformEndpointSlice) and
// the tracker keeps pointers to the same values, so each slice is held
// in memory once. A Slice is never modified after it is made.
type Slice struct {
	// ObjectMeta has only the namespace, name, UID and resourceVersion,
	// which the informer's cache needs.
	metav1.ObjectMeta
	service     string
	ports       []slicePort
	endpoints   []sliceEndpoint
	triggerTime time.Time
}

// sameContent reports whether two Slices say the same to the proxy.
func sameContent(a, b *Slice) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.service == b.service && reflect.DeepEqual(a.ports, b.ports) && reflect.DeepEqual(a.endpoints, b.endpoints)
}

type slicePort struct {
	key  snapshot.PortKey
	port uint16
}

// sliceEndpoint is one endpoint of a Slice, kept small: there are
// 100,000 of them in a big cluster.
type sliceEndpoint struct {
	addr  netip.Addr
	node  unique.Handle[string] // interned: many endpoints share a node
	hints *hints                // nil without topology hints
	flags endpointFlags
}

type hints struct {
	zones, nodes []string
}

type endpointFlags uint8

const (
	ready endpointFlags = 1 << iota
	serving
	terminating
)

var noNode = unique.Make("")

// Update records that an EndpointSlice went from old to cur (old nil:
// created; cur nil: deleted). It returns true when the slice's content
// changed in a way the proxy cares about.
func (t *EndpointsTracker) Update(old, cur *Slice) bool {
	// A slice without the service-name label belongs to no Service.
	if cur != nil && cur.service == "" {
		cur = nil
	}
	if old != nil && old.service == "" {
		old = nil
	}
	if cur == nil && old == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur == nil {
		return t.removeLocked(old)
	}
	if old != nil && old.service != cur.service {
		// Relabelled to another Service: gone from the old one.
		t.removeLocked(old)
	}
	nn := types.NamespacedName{Namespace: cur.Namespace, Name: cur.service}
	bySlice := t.slices[nn]
	same := sameContent(bySlice[cur.Name], cur)
	if bySlice == nil {
		bySlice = map[string]*Slice{}
		t.slices[nn] = bySlice
	}
	bySlice[cur.Name] = cur
	if same {
		return false
	}
	if tt := cur.triggerTime; !tt.IsZero() && tt.After(t.start) {
		t.triggers[nn] = append(t.triggers[nn], tt)
	}
	t.dirty[nn] = struct{}{}
	return true
}

// removeLocked forgets slice s and reports whether it was known.
func (t *EndpointsTracker) removeLocked(s *Slice) bool {
	nn := types.NamespacedName{Namespace: s.Namespace, Name: s.service}
	bySlice := t.slices[nn]
	if bySlice[s.Name] == nil {
		return false
	}
	delete(bySlice, s.Name)
	if len(bySlice) == 0 {
		delete(t.slices, nn)
	}
	t.dirty[nn] = struct{}{}
	return true
}

// Received returns the resourceVersions of the EndpointSlices of nn the
// tracker holds, by slice name, and whether changes of nn wait for the
// next snapshot. The proxy's status endpoint shows them.
func (t *EndpointsTracker) Received(nn types.NamespacedName) (map[string]string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var versions map[string]string
	for name, s := range t.slices[nn] {
		if versions == nil {
			versions = map[string]string{}
		}
		versions[name] = s.ResourceVersion
	}
	_, dirty := t.dirty[nn]
	return versions, dirty
}

// Pending returns how many Services have unapplied endpoint changes.
func (t *EndpointsTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.dirty)
}

// checkout merges the slices of every Service changed since the last
// checkout and returns them (nil for a Service left without slices),
// with the trigger times recorded for them.
func (t *EndpointsTracker) checkout() (map[types.NamespacedName]*snapshot.ServiceEndpoints, map[types.NamespacedName][]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.NamespacedName]*snapshot.ServiceEndpoints, len(t.dirty))
	for nn := range t.dirty {
		out[nn] = t.mergeLocked(t.slices[nn])
	}
	triggers := t.triggers
	t.dirty = map[types.NamespacedName]struct{}{}
	t.triggers = map[types.NamespacedName][]time.Time{}
	return out, triggers
}

// mergeLocked merges a Service's slices into endpoints per port. An
// address that appears in two slices (briefly, while the controller moves
// it) counts once; the local copy wins, as upstream. Each port's list is
// sorted so rules come out the same whatever the slice order.
func (t *EndpointsTracker) mergeLocked(bySlice map[string]*Slice) *snapshot.ServiceEndpoints {
	if len(bySlice) == 0 {
		return nil
	}
	names := make([]string, 0, len(bySlice))
	for name := range bySlice {
		names = append(names, name)
	}
	sort.Strings(names)
	type key struct {
		port snapshot.PortKey
		ap   netip.AddrPort
	}
	seen := map[key]*snapshot.Endpoint{}
	byPort := map[snapshot.PortKey][]*snapshot.Endpoint{}
	for _, name := range names {
		s := bySlice[name]
		for _, p := range s.ports {
			for i := range s.endpoints {
				se := &s.endpoints[i]
				ep := &snapshot.Endpoint{
					Addr:        se.addr,
					Port:        p.port,
					Ready:       se.flags&ready != 0,
					Serving:     se.flags&serving != 0,
					Terminating: se.flags&terminating != 0,
					NodeName:    se.node.Value(),
				}
				ep.Local = ep.NodeName != "" && ep.NodeName == t.hostname
				if se.hints != nil {
					ep.ZoneHints, ep.NodeHints = se.hints.zones, se.hints.nodes
				}
				k := key{p.key, ep.AddrPort()}
				if prev, dup := seen[k]; dup {
					if ep.Local && !prev.Local {
						*prev = *ep
					}
					continue
				}
				seen[k] = ep
				byPort[p.key] = append(byPort[p.key], ep)
			}
		}
	}
	if len(byPort) == 0 {
		return nil
	}
	for _, list := range byPort {
		slices.SortFunc(list, func(a, b *snapshot.Endpoint) int {
			return a.AddrPort().Compare(b.AddrPort())
		})
	}
	return &snapshot.ServiceEndpoints{ByPort: byPort}
}

// SliceFromAPI converts an EndpointSlice to the proxy's view of it.
func SliceFromAPI(s *discovery.EndpointSlice) *Slice {
	out := &Slice{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		service:    s.Labels[discovery.LabelServiceName],
	}
	out.triggerTime, _ = triggerTime(s)
	if s.AddressType != discovery.AddressTypeIPv4 && s.AddressType != discovery.AddressTypeIPv6 {
		return out // FQDN slices carry nothing a proxy can use
	}
	for _, p := range s.Ports {
		if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
			continue
		}
		k := snapshot.PortKey{Protocol: v1.ProtocolTCP}
		if p.Name != nil {
			k.Name = *p.Name
		}
		if p.Protocol != nil {
			k.Protocol = *p.Protocol
		}
		out.ports = append(out.ports, slicePort{key: k, port: uint16(*p.Port)})
	}
	out.endpoints = make([]sliceEndpoint, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		addr, err := netip.ParseAddr(e.Addresses[0])
		if err != nil {
			continue
		}
		addr = addr.Unmap()
		if (s.AddressType == discovery.AddressTypeIPv4) != addr.Is4() {
			continue
		}
		isReady := e.Conditions.Ready == nil || *e.Conditions.Ready
		se := sliceEndpoint{addr: addr, node: noNode}
		if isReady {
			se.flags |= ready
		}
		// Serving defaults to Ready for slices from before the condition.
		if (e.Conditions.Serving == nil && isReady) || (e.Conditions.Serving != nil && *e.Conditions.Serving) {
			se.flags |= serving
		}
		if e.Conditions.Terminating != nil && *e.Conditions.Terminating {
			se.flags |= terminating
		}
		if e.NodeName != nil {
			se.node = unique.Make(*e.NodeName)
		}
		if e.Hints != nil && (len(e.Hints.ForZones) > 0 || len(e.Hints.ForNodes) > 0) {
			se.hints = &hints{}
			for _, z := range e.Hints.ForZones {
				se.hints.zones = append(se.hints.zones, z.Name)
			}
			for _, n := range e.Hints.ForNodes {
				se.hints.nodes = append(se.hints.nodes, n.Name)
			}
		}
		out.endpoints = append(out.endpoints, se)
	}
	return out
}

func triggerTime(s *discovery.EndpointSlice) (time.Time, bool) {
	v, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}
