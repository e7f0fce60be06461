package servicelb

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// ReservedPort is a port of the nodes' addresses that a process other
// than the Services listens on (the Ingress controller on 80 and 443, the
// API server, DNS), in every IP family. No Service gets the nodes'
// addresses with it: the proxy would send the port's traffic to the
// Service instead of the process.
type ReservedPort struct {
	Protocol corev1.Protocol
	Port     int32
	// Holder says who listens on the port, in the Event of a Service
	// refused it ("the Ingress controller of portal server (--http-port)").
	Holder string
}

// ParseReservedPorts reads a comma-separated list of ports, each
// "PORT/PROTOCOL" (80/TCP, 53/UDP; PORT alone means TCP), held by holder.
func ParseReservedPorts(s, holder string) ([]ReservedPort, error) {
	var out []ReservedPort
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		num, proto, _ := strings.Cut(f, "/")
		port, err := strconv.ParseUint(num, 10, 16)
		if err != nil || port == 0 {
			return nil, fmt.Errorf("%q: port is not a number from 1 to 65535", f)
		}
		p := corev1.Protocol(strings.ToUpper(proto))
		switch p {
		case "":
			p = corev1.ProtocolTCP
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			return nil, fmt.Errorf("%q: protocol is not TCP, UDP or SCTP", f)
		}
		out = append(out, ReservedPort{Protocol: p, Port: int32(port), Holder: holder})
	}
	return out, nil
}

// Ports records which owner (Service key) holds each NodePort, at most
// one per port, as a host port of the nodes is one process's. Pure and in
// memory like Allocator, rebuilt from the Services' status at start. Safe
// for concurrent use; the zero value is not: make one with NewPorts.
type Ports struct {
	mu      sync.Mutex
	owner   map[NodePort]string
	byOwner map[string][]NodePort
	// reserved are the ports no owner may hold, with their holders.
	reserved map[reservedKey]string
}

type reservedKey struct {
	protocol corev1.Protocol
	port     int32
}

// NewPorts returns a Ports with no port held, whose reserved ports no
// owner may claim. Of two reservations of one port the first is told.
func NewPorts(reserved ...ReservedPort) *Ports {
	p := &Ports{owner: map[NodePort]string{}, byOwner: map[string][]NodePort{}, reserved: map[reservedKey]string{}}
	for _, r := range reserved {
		k := reservedKey{r.Protocol, r.Port}
		if _, ok := p.reserved[k]; !ok {
			p.reserved[k] = r.Holder
		}
	}
	return p
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
		if h, ok := p.reserved[reservedKey{np.Protocol, np.Port}]; ok {
			p.setLocked(owner, nil)
			return len(held) > 0, fmt.Errorf("port %s %w by %s", np, ErrPortInUse, h)
		}
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
