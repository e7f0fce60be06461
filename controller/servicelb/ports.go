package servicelb

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// ErrPortInUse: another Service holds the port on the nodes' addresses.
var ErrPortInUse = errors.New("in use on the nodes")

// NodePort is one port of the nodes' addresses of one IP family, which
// one LoadBalancer Service at a time may have when Services share the
// nodes' addresses.
type NodePort struct {
	Family   corev1.IPFamily
	Protocol corev1.Protocol
	Port     int32
}

// String returns p as "80/TCP" (with the family for IPv6, where the same
// port of IPv4 is another one).
func (p NodePort) String() string {
	if p.Family == corev1.IPv6Protocol {
		return fmt.Sprintf("%d/%s (IPv6)", p.Port, p.Protocol)
	}
	return fmt.Sprintf("%d/%s", p.Port, p.Protocol)
}

// nodePorts returns the ports svc needs on the nodes: each of its ports
// in each of its IP families.
func nodePorts(svc *corev1.Service) []NodePort {
	var out []NodePort
	for _, f := range serviceFamilies(svc) {
		for _, p := range svc.Spec.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			np := NodePort{Family: f, Protocol: proto, Port: p.Port}
			if !slices.Contains(out, np) {
				out = append(out, np)
			}
		}
	}
	return out
}

// Ports records which owner (Service key) holds each NodePort, at most
// one per port, as a host port of the nodes is one process's. Pure and in
// memory like Allocator, rebuilt from the Services' status at start. Safe
// for concurrent use; the zero value is not: make one with NewPorts.
type Ports struct {
	mu      sync.Mutex
	owner   map[NodePort]string
	byOwner map[string][]NodePort
}

// NewPorts returns a Ports with no port held.
func NewPorts() *Ports {
	return &Ports{owner: map[NodePort]string{}, byOwner: map[string][]NodePort{}}
}

// Claim makes ports exactly what owner holds. It is all or nothing: when
// another owner holds one of them, owner ends up holding none (a Service
// showing the nodes' addresses would be served on every one of its
// ports, so it may show them only with all its ports), and the error
// names the first port taken and its holder. freed reports whether owner
// let go of a port it held.
func (p *Ports) Claim(owner string, ports []NodePort) (freed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := p.byOwner[owner]
	for _, np := range ports {
		if o, ok := p.owner[np]; ok && o != owner {
			p.setLocked(owner, nil)
			return len(held) > 0, fmt.Errorf("port %s %w by Service %s", np, ErrPortInUse, o)
		}
	}
	p.setLocked(owner, ports)
	return slices.ContainsFunc(held, func(np NodePort) bool { return !slices.Contains(ports, np) }), nil
}

// Release lets go of every port of owner and reports whether it held any.
func (p *Ports) Release(owner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := len(p.byOwner[owner]) > 0
	p.setLocked(owner, nil)
	return held
}

// Holder returns who holds np.
func (p *Ports) Holder(np NodePort) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.owner[np]
	return o, ok
}

func (p *Ports) setLocked(owner string, ports []NodePort) {
	for _, np := range p.byOwner[owner] {
		delete(p.owner, np)
	}
	if len(ports) == 0 {
		delete(p.byOwner, owner)
		return
	}
	for _, np := range ports {
		p.owner[np] = owner
	}
	p.byOwner[owner] = slices.Clone(ports)
}
