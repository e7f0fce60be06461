// Package index holds what cluster DNS answers from: Services,
// EndpointSlices, Namespaces and (for verified pod records) Pod IPs, kept in
// maps keyed by lower-cased names so that every lookup is O(1).
//
// It is pure: the informer edge feeds it slim objects one event at a time
// (no rebuild per change) and the answer logic asks it questions. It holds
// no client, socket or clock, and it knows nothing of the DNS wire format.
// Objects handed to it are never changed afterwards, so readers may keep the
// pointers they get without holding any lock.
package index

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Kind is how a Service is published in DNS.
type Kind uint8

const (
	// ClusterIP services answer with their cluster IPs.
	ClusterIP Kind = iota
	// Headless services (clusterIP None) answer with their endpoints.
	Headless
	// ExternalName services answer with a CNAME.
	ExternalName
)

// Port is a service or endpoint port.
type Port struct {
	Name     string // as in the API; SRV matches it case-insensitively
	Protocol string // "TCP", "UDP" or "SCTP"
	Port     int32
}

// Service is the part of a core/v1 Service that DNS needs.
type Service struct {
	Namespace, Name string
	Kind            Kind
	ClusterIPs      []netip.Addr // ClusterIP only: one per family
	Ports           []Port
	ExternalName    string // ExternalName only, without trailing dot
	// PublishNotReady publishes endpoints whether they are ready or not
	// (spec.publishNotReadyAddresses).
	PublishNotReady bool
}

// Endpoint is one endpoint of an EndpointSlice.
type Endpoint struct {
	Addresses []netip.Addr
	Hostname  string // empty: DNS uses a name made from the address
	// Ready is the ready condition, with unset counting as ready (as the
	// EndpointSlice API says consumers should).
	Ready bool
}

// EndpointSlice is the part of a discovery/v1 EndpointSlice that DNS needs.
type EndpointSlice struct {
	Namespace, Name string
	Service         string // kubernetes.io/service-name label; empty: not indexed
	Ports           []Port
	Endpoints       []Endpoint
}

// Published reports whether endpoint e of a slice of svc is published: ready
// ones always, the others only with publishNotReadyAddresses. Terminating
// endpoints are never ready, so they are left out like other not-ready ones.
func Published(svc *Service, e *Endpoint) bool { return e.Ready || svc.PublishNotReady }

// Key names a namespaced object, lower-cased.
type Key struct{ Namespace, Name string }

func keyOf(ns, name string) Key { return Key{strings.ToLower(ns), strings.ToLower(name)} }

// Target is what a PTR record points back to: a Service, and for an
// endpoint of a headless Service, the endpoint's hostname.
type Target struct {
	Namespace, Service string
	Hostname           string // empty for a cluster IP
}

// Index is the in-memory record store. Its zero value is empty and ready to
// use. All methods are safe for concurrent use.
type Index struct {
	mu         sync.RWMutex
	services   map[Key]*Service
	slices     map[Key]*EndpointSlice            // by slice namespace/name
	bySvc      map[Key]map[string]*EndpointSlice // by service key, then slice name
	namespaces map[string]struct{}               // Namespace objects seen
	nsRefs     map[string]int                    // services per namespace
	clusterIPs map[netip.Addr]Key                // cluster IP -> service
	epIPs      map[netip.Addr][]Key              // endpoint IP -> slices holding it (usually one)
	pods       map[Key]map[netip.Addr]struct{}   // pod namespace/name -> IPs
	podIPs     map[podIP]int                     // namespace + IP -> pods with it
	gen        atomic.Uint64
}

type podIP struct {
	namespace string
	ip        netip.Addr
}

// Generation changes whenever the index does, so that caches of answers
// built from it can tell they are stale with one atomic load.
func (x *Index) Generation() uint64 { return x.gen.Load() }

// Bump changes the generation without a change to the data (for example
// when the informers have synced and answers change from SERVFAIL).
func (x *Index) Bump() { x.gen.Add(1) }

func (x *Index) initLocked() {
	if x.services != nil {
		return
	}
	x.services = map[Key]*Service{}
	x.slices = map[Key]*EndpointSlice{}
	x.bySvc = map[Key]map[string]*EndpointSlice{}
	x.namespaces = map[string]struct{}{}
	x.nsRefs = map[string]int{}
	x.clusterIPs = map[netip.Addr]Key{}
	x.epIPs = map[netip.Addr][]Key{}
	x.pods = map[Key]map[netip.Addr]struct{}{}
	x.podIPs = map[podIP]int{}
}

// SetService adds or replaces a Service.
func (x *Index) SetService(s *Service) {
	k := keyOf(s.Namespace, s.Name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	if old := x.services[k]; old != nil {
		x.dropServiceLocked(k, old)
	}
	x.services[k] = s
	x.nsRefs[k.Namespace]++
	for _, ip := range s.ClusterIPs {
		x.clusterIPs[ip] = k
	}
	x.gen.Add(1)
}

// DeleteService removes a Service; its slices stay indexed until their own
// delete events, but no name resolves through them any more.
func (x *Index) DeleteService(namespace, name string) {
	k := keyOf(namespace, name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	if old := x.services[k]; old != nil {
		x.dropServiceLocked(k, old)
		delete(x.services, k)
		x.gen.Add(1)
	}
}

func (x *Index) dropServiceLocked(k Key, old *Service) {
	for _, ip := range old.ClusterIPs {
		if x.clusterIPs[ip] == k {
			delete(x.clusterIPs, ip)
		}
	}
	if x.nsRefs[k.Namespace]--; x.nsRefs[k.Namespace] <= 0 {
		delete(x.nsRefs, k.Namespace)
	}
}

// SetEndpointSlice adds or replaces an EndpointSlice.
func (x *Index) SetEndpointSlice(s *EndpointSlice) {
	k := keyOf(s.Namespace, s.Name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	if old := x.slices[k]; old != nil {
		x.dropSliceLocked(k, old)
	}
	x.slices[k] = s
	if s.Service != "" {
		sk := keyOf(s.Namespace, s.Service)
		m := x.bySvc[sk]
		if m == nil {
			m = map[string]*EndpointSlice{}
			x.bySvc[sk] = m
		}
		m[k.Name] = s
	}
	for i := range s.Endpoints {
		for _, ip := range s.Endpoints[i].Addresses {
			if !slices.Contains(x.epIPs[ip], k) {
				x.epIPs[ip] = append(x.epIPs[ip], k)
			}
		}
	}
	x.gen.Add(1)
}

// DeleteEndpointSlice removes an EndpointSlice.
func (x *Index) DeleteEndpointSlice(namespace, name string) {
	k := keyOf(namespace, name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	if old := x.slices[k]; old != nil {
		x.dropSliceLocked(k, old)
		delete(x.slices, k)
		x.gen.Add(1)
	}
}

func (x *Index) dropSliceLocked(k Key, old *EndpointSlice) {
	if old.Service != "" {
		sk := keyOf(old.Namespace, old.Service)
		if m := x.bySvc[sk]; m != nil {
			delete(m, k.Name)
			if len(m) == 0 {
				delete(x.bySvc, sk)
			}
		}
	}
	for i := range old.Endpoints {
		for _, ip := range old.Endpoints[i].Addresses {
			keys := slices.DeleteFunc(x.epIPs[ip], func(o Key) bool { return o == k })
			if len(keys) == 0 {
				delete(x.epIPs, ip)
			} else {
				x.epIPs[ip] = keys
			}
		}
	}
}

// SetNamespace records that a Namespace exists.
func (x *Index) SetNamespace(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	n := strings.ToLower(name)
	if _, ok := x.namespaces[n]; !ok {
		x.namespaces[n] = struct{}{}
		x.gen.Add(1)
	}
}

// DeleteNamespace records that a Namespace is gone.
func (x *Index) DeleteNamespace(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	n := strings.ToLower(name)
	if _, ok := x.namespaces[n]; ok {
		delete(x.namespaces, n)
		x.gen.Add(1)
	}
}

// SetPod records the IPs of a Pod (used by verified pod records only).
func (x *Index) SetPod(namespace, name string, ips []netip.Addr) {
	k := keyOf(namespace, name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	old := x.pods[k]
	if len(old) == len(ips) {
		same := true
		for _, ip := range ips {
			if _, ok := old[ip]; !ok {
				same = false
			}
		}
		if same {
			return
		}
	}
	x.dropPodLocked(k)
	if len(ips) > 0 {
		m := make(map[netip.Addr]struct{}, len(ips))
		for _, ip := range ips {
			m[ip] = struct{}{}
			x.podIPs[podIP{k.Namespace, ip}]++
		}
		x.pods[k] = m
	}
	x.gen.Add(1)
}

// DeletePod forgets a Pod.
func (x *Index) DeletePod(namespace, name string) {
	k := keyOf(namespace, name)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.initLocked()
	if _, ok := x.pods[k]; ok {
		x.dropPodLocked(k)
		x.gen.Add(1)
	}
}

func (x *Index) dropPodLocked(k Key) {
	for ip := range x.pods[k] {
		pk := podIP{k.Namespace, ip}
		if x.podIPs[pk]--; x.podIPs[pk] <= 0 {
			delete(x.podIPs, pk)
		}
	}
	delete(x.pods, k)
}

// Service returns the Service namespace/name (lower-cased names), or nil.
func (x *Index) Service(namespace, name string) *Service {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.services[Key{namespace, name}]
}

// EndpointSlices returns the slices of Service namespace/name (lower-cased
// names), in no particular order.
func (x *Index) EndpointSlices(namespace, name string) []*EndpointSlice {
	x.mu.RLock()
	defer x.mu.RUnlock()
	m := x.bySvc[Key{namespace, name}]
	out := make([]*EndpointSlice, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	return out
}

// NamespaceExists reports whether a Namespace (lower-cased) exists: its
// object was seen, or a Service lives in it.
func (x *Index) NamespaceExists(namespace string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.namespaces[namespace]
	return ok || x.nsRefs[namespace] > 0
}

// PodIPExists reports whether a Pod in namespace (lower-cased) has ip.
func (x *Index) PodIPExists(namespace string, ip netip.Addr) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.podIPs[podIP{namespace, ip}] > 0
}

// Reverse returns the names an IP points back to: the Service whose cluster
// IP it is, else each published endpoint of a headless Service that has it.
func (x *Index) Reverse(ip netip.Addr) []Target {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if k, ok := x.clusterIPs[ip]; ok {
		if s := x.services[k]; s != nil {
			return []Target{{Namespace: s.Namespace, Service: s.Name}}
		}
	}
	var out []Target
	for _, sk := range x.epIPs[ip] {
		sl := x.slices[sk]
		if sl == nil || sl.Service == "" {
			continue
		}
		svc := x.services[keyOf(sl.Namespace, sl.Service)]
		if svc == nil || svc.Kind != Headless {
			continue
		}
		for i := range sl.Endpoints {
			e := &sl.Endpoints[i]
			if !Published(svc, e) {
				continue
			}
			for _, a := range e.Addresses {
				if a == ip {
					out = append(out, Target{Namespace: svc.Namespace, Service: svc.Name, Hostname: Hostname(e, a)})
				}
			}
		}
	}
	return out
}

// Hostname is the DNS label of endpoint e at address a: its hostname, else
// the address with dots (IPv4) or colons (IPv6) as dashes, as CoreDNS names
// endpoints without one ("10-1-2-3", "fd00--1").
func Hostname(e *Endpoint, a netip.Addr) string {
	if e.Hostname != "" {
		return strings.ToLower(e.Hostname)
	}
	return DashedIP(a)
}

// DashedIP writes an address as one DNS label.
func DashedIP(a netip.Addr) string {
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	s := strings.ReplaceAll(a.String(), ":", "-")
	if strings.HasSuffix(s, "-") {
		s += "0"
	}
	return s
}

// Stats counts what the index holds, for logs and tests.
type Stats struct{ Services, EndpointSlices, Namespaces, Pods int }

// Stats returns the current counts.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return Stats{len(x.services), len(x.slices), len(x.namespaces), len(x.pods)}
}
