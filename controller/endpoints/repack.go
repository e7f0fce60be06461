package endpoints

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Repack returns subsets in their canonical form: every distinct set of
// (address, readiness) pairs appears once, with all the ports that share
// it. An address is identified by its IP and target UID; if it is not
// ready on a port in any input subset it is not ready on that port.
// Ports without addresses are dropped. Addresses are sorted by IP then UID,
// ports by number, protocol and name, and subsets by their first port, so
// equal inputs always give equal outputs. The input is not modified.
func Repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	r := newRepacker()
	for i := range subsets {
		r.add(&subsets[i])
	}
	return r.subsets()
}

func newRepacker() *repacker {
	return &repacker{addrs: map[addrKey]corev1.EndpointAddress{}, byPort: map[portKey]map[addrKey]bool{}}
}

// addrKey identifies an address the way upstream does: two pods may share
// an IP (host network), so the target UID is part of the identity.
type addrKey struct {
	ip  string
	uid types.UID
}

func keyOf(a *corev1.EndpointAddress) addrKey {
	k := addrKey{ip: a.IP}
	if a.TargetRef != nil {
		k.uid = a.TargetRef.UID
	}
	return k
}

// portKey is an EndpointPort as a map key; AppProtocol is a pointer, so
// the struct itself would compare by identity.
type portKey struct {
	noPorts     bool // addresses of a subset without ports
	name        string
	port        int32
	protocol    corev1.Protocol
	appProtocol string
	hasApp      bool
}

func portKeyOf(p corev1.EndpointPort) portKey {
	k := portKey{name: p.Name, port: p.Port, protocol: p.Protocol}
	if p.AppProtocol != nil {
		k.appProtocol, k.hasApp = *p.AppProtocol, true
	}
	return k
}

func (k portKey) endpointPort() corev1.EndpointPort {
	p := corev1.EndpointPort{Name: k.name, Port: k.port, Protocol: k.protocol}
	if k.hasApp {
		app := k.appProtocol
		p.AppProtocol = &app
	}
	return p
}

func comparePortKeys(a, b portKey) int {
	if a.noPorts != b.noPorts {
		if a.noPorts {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.port, b.port), cmp.Compare(a.protocol, b.protocol),
		cmp.Compare(a.name, b.name), cmp.Compare(a.appProtocol, b.appProtocol))
}

type repacker struct {
	addrs  map[addrKey]corev1.EndpointAddress // first copy seen of each address
	byPort map[portKey]map[addrKey]bool       // port -> address -> ready
}

func (r *repacker) add(s *corev1.EndpointSubset) {
	ports := make([]portKey, 0, len(s.Ports))
	for _, p := range s.Ports {
		ports = append(ports, portKeyOf(p))
	}
	if len(ports) == 0 {
		ports = append(ports, portKey{noPorts: true})
	}
	for _, pk := range ports {
		r.addAll(pk, s.Addresses, true)
		r.addAll(pk, s.NotReadyAddresses, false)
	}
}

func (r *repacker) addAll(pk portKey, addrs []corev1.EndpointAddress, ready bool) {
	for i := range addrs {
		r.put(pk, &addrs[i], ready, true)
	}
}

// put adds one address behind port pk. The first copy seen of an address
// is kept: deep-copied when clone is set, else kept as it is, for a caller
// that built it for the repacker alone.
func (r *repacker) put(pk portKey, a *corev1.EndpointAddress, ready, clone bool) {
	k := keyOf(a)
	if _, ok := r.addrs[k]; !ok {
		if clone {
			a = a.DeepCopy()
		}
		r.addrs[k] = *a
	}
	set := r.byPort[pk]
	if set == nil {
		set = map[addrKey]bool{}
		r.byPort[pk] = set
	}
	if was, seen := set[k]; !seen || was {
		set[k] = ready // not ready wins
	}
}

// subsets groups the ports by the exact set of (address, ready) pairs
// behind them and builds one subset per group.
func (r *repacker) subsets() []corev1.EndpointSubset {
	groups := map[string][]portKey{}
	members := map[string]map[addrKey]bool{}
	for pk, set := range r.byPort {
		sig := signature(set)
		groups[sig] = append(groups[sig], pk)
		members[sig] = set
	}
	out := make([]corev1.EndpointSubset, 0, len(groups))
	for sig, ports := range groups {
		out = append(out, r.subset(ports, members[sig]))
	}
	slices.SortFunc(out, compareSubsets)
	return out
}

func (r *repacker) subset(ports []portKey, set map[addrKey]bool) corev1.EndpointSubset {
	slices.SortFunc(ports, comparePortKeys)
	var s corev1.EndpointSubset
	for _, pk := range ports {
		if !pk.noPorts {
			s.Ports = append(s.Ports, pk.endpointPort())
		}
	}
	for k, ready := range set {
		orig := r.addrs[k]
		a := *orig.DeepCopy()
		if ready {
			s.Addresses = append(s.Addresses, a)
		} else {
			s.NotReadyAddresses = append(s.NotReadyAddresses, a)
		}
	}
	sortAddresses(s.Addresses)
	sortAddresses(s.NotReadyAddresses)
	return s
}

// signature renders an address set as a string, so that sets can be
// grouped in a map.
func signature(set map[addrKey]bool) string {
	keys := make([]addrKey, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b addrKey) int {
		return cmp.Or(strings.Compare(a.ip, b.ip), strings.Compare(string(a.uid), string(b.uid)))
	})
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k.ip)
		b.WriteByte('/')
		b.WriteString(string(k.uid))
		if set[k] {
			b.WriteString("/r;")
		} else {
			b.WriteString("/n;")
		}
	}
	return b.String()
}

// compareSubsets orders canonical subsets by their first port. Repack
// gives every port to exactly one subset, so this is a total order.
func compareSubsets(a, b corev1.EndpointSubset) int {
	return comparePortKeys(firstPort(a), firstPort(b))
}

func firstPort(s corev1.EndpointSubset) portKey {
	if len(s.Ports) == 0 {
		return portKey{noPorts: true}
	}
	return portKeyOf(s.Ports[0])
}

// sortAddresses orders addresses numerically by IP (unparsable ones last,
// by text), then by target UID.
func sortAddresses(addrs []corev1.EndpointAddress) {
	type keyed struct {
		ip   netip.Addr
		addr corev1.EndpointAddress
	}
	ks := make([]keyed, len(addrs))
	for i, a := range addrs {
		ip, _ := netip.ParseAddr(a.IP)
		ks[i] = keyed{ip.Unmap(), a}
	}
	slices.SortFunc(ks, func(x, y keyed) int {
		return cmp.Or(compareIPs(x.ip, y.ip), strings.Compare(x.addr.IP, y.addr.IP),
			strings.Compare(string(keyOf(&x.addr).uid), string(keyOf(&y.addr).uid)))
	})
	for i := range ks {
		addrs[i] = ks[i].addr
	}
}

// compareIPs orders valid addresses before invalid ones.
func compareIPs(a, b netip.Addr) int {
	if a.IsValid() != b.IsValid() {
		if a.IsValid() {
			return -1
		}
		return 1
	}
	return a.Compare(b)
}
