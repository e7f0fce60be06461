package allocator

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/apiserver/validation"
)

// Problem is something repair found that a person should know about; the
// caller turns it into an Event on the Service.
type Problem struct {
	Namespace, Name string
	Reason          string
	Message         string
}

// Repairer reconciles the reservations with the Services that exist.
type Repairer struct {
	a *Allocator
	// suspects are reservations no Service held at the last pass. They are
	// freed only if still unheld at the next one, so a create in flight
	// (reserved, not yet stored) is never robbed.
	suspects map[Key]string
}

// NewRepairer returns a repairer for a.
func NewRepairer(a *Allocator) *Repairer { return &Repairer{a: a, suspects: map[Key]string{}} }

// Repair frees reservations no Service holds (seen unheld twice in a row),
// records reservations a stored Service holds but the store lacks, and
// reports addresses held twice or outside the configured ranges. services
// must be a complete list read after the previous pass.
func (r *Repairer) Repair(ctx context.Context, services []corev1.Service) ([]Problem, error) {
	owners, _, err := r.a.store.List(ctx)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	wanted := map[Key]string{}
	sort.Slice(services, func(i, j int) bool { return services[i].CreationTimestamp.Before(&services[j].CreationTimestamp) })
	for i := range services {
		svc := &services[i]
		owner := Owner(svc)
		for _, k := range Keys(svc) {
			if p := r.outOfRange(svc, k); p != nil {
				problems = append(problems, *p)
				continue
			}
			if first, dup := wanted[k]; dup && first != owner {
				problems = append(problems, Problem{svc.Namespace, svc.Name, duplicateReason(k),
					fmt.Sprintf("%s is also held by Service %s", describe(k), first)})
				continue
			}
			wanted[k] = owner
			switch have, ok := owners[k]; {
			case !ok:
				if taken, err := r.a.store.Reserve(ctx, []Key{k}, owner); err == nil && len(taken) == 0 {
					r.a.observe(k, owner, false)
				}
			case have != owner:
				problems = append(problems, Problem{svc.Namespace, svc.Name, duplicateReason(k),
					fmt.Sprintf("%s is recorded for %s, not this Service", describe(k), have)})
			}
		}
	}
	next := map[Key]string{}
	for k, owner := range owners {
		if _, ok := wanted[k]; ok {
			continue
		}
		if r.suspects[k] == owner {
			if err := r.a.store.Release(ctx, []Key{k}, owner); err == nil {
				r.a.observe(k, owner, true)
			}
			continue
		}
		next[k] = owner
	}
	r.suspects = next
	return problems, nil
}

func (r *Repairer) outOfRange(svc *corev1.Service, k Key) *Problem {
	ip, port, err := parseKey(k)
	if err != nil {
		return nil
	}
	if ip.IsValid() {
		if err := validation.ClusterIPInRange(ip, r.a.cfg); err != nil {
			return &Problem{svc.Namespace, svc.Name, "ClusterIPOutOfRange",
				fmt.Sprintf("Cluster IP %s is not within the configured Service CIDR: %v", ip, err)}
		}
		return nil
	}
	if err := validation.NodePortInRange(port, r.a.cfg); err != nil {
		return &Problem{svc.Namespace, svc.Name, "PortOutOfRange",
			fmt.Sprintf("Port %d is not within the port range: %v", port, err)}
	}
	return nil
}

func duplicateReason(k Key) string {
	if addrOf(k) != (netip.Addr{}) {
		return "ClusterIPAlreadyAllocated"
	}
	return "PortAlreadyAllocated"
}

func describe(k Key) string {
	if ip := addrOf(k); ip.IsValid() {
		return "cluster IP " + ip.String()
	}
	return fmt.Sprintf("node port %d", portOf(k))
}
