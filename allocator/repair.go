package allocator

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	a     *Allocator
	grace time.Duration
	now   func() time.Time
	// suspects are reservations no Service held, with their owner and when
	// that was first seen. A suspect is freed only once it has been unheld
	// on a later pass and for at least grace, so a create in flight
	// (reserved, not yet stored) is never robbed however often repair runs.
	suspects map[Key]suspect
}

type suspect struct {
	owner string
	since time.Time
}

// NewRepairer returns a repairer for a that frees reservations unheld for
// at least grace.
func NewRepairer(a *Allocator, grace time.Duration) *Repairer {
	return &Repairer{a: a, grace: grace, now: time.Now, suspects: map[Key]suspect{}}
}

// Repair frees reservations no Service holds (seen unheld on two passes,
// grace apart),
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
	now := r.now()
	next := map[Key]suspect{}
	for k, owner := range owners {
		if _, ok := wanted[k]; ok {
			continue
		}
		s, seen := r.suspects[k]
		if seen && s.owner == owner && now.Sub(s.since) >= r.grace {
			if err := r.a.store.Release(ctx, []Key{k}, owner); err == nil {
				r.a.observe(k, owner, true)
			}
			continue
		}
		if !seen || s.owner != owner {
			s = suspect{owner: owner, since: now}
		}
		next[k] = s
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
		if err := r.a.checkIP(ip); err != nil {
			return &Problem{svc.Namespace, svc.Name, "ClusterIPOutOfRange",
				fmt.Sprintf("Cluster IP %s is not within the configured Service CIDR: %v", ip, err)}
		}
		return nil
	}
	if err := r.a.checkPort(port); err != nil {
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
