package servicelb

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Errors of the Allocator, to compare with errors.Is.
var (
	// ErrNotInPool: the requested address is in no pool.
	ErrNotInPool = errors.New("not in any load balancer IP pool")
	// ErrInUse: the requested address belongs to another owner.
	ErrInUse = errors.New("in use")
	// ErrExhausted: every address of the family's pools is taken.
	ErrExhausted = errors.New("load balancer IP pool exhausted")
	// ErrNoPool: no pool serves the family.
	ErrNoPool = errors.New("no load balancer IP pool")
)

// Request asks for one address of Family: IP when it is set, else any.
type Request struct {
	Family corev1.IPFamily
	IP     netip.Addr
}

// Assignment is the addresses one owner holds.
type Assignment struct {
	Owner string
	IPs   []netip.Addr
}

// Allocator hands out the addresses of its pools to owners (Service keys),
// at most one owner per address. It is pure and in memory: the controller
// rebuilds it from the Services' status at start. Safe for concurrent use.
type Allocator struct {
	pools Pools

	mu      sync.Mutex
	owner   map[netip.Addr]string
	byOwner map[string][]netip.Addr
}

// NewAllocator returns an allocator with no address in use.
func NewAllocator(pools Pools) *Allocator {
	return &Allocator{pools: pools, owner: map[netip.Addr]string{}, byOwner: map[string][]netip.Addr{}}
}

// Allocate gives owner one address per request and frees the addresses it
// held that no request keeps. An automatic request keeps the address owner
// already has in that family. It is all or nothing: on error owner keeps
// exactly what it held.
func (a *Allocator) Allocate(owner string, reqs []Request) ([]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := a.byOwner[owner]
	taken := func(ip netip.Addr, chosen []netip.Addr) bool {
		o, ok := a.owner[ip]
		return ok && o != owner || slices.Contains(chosen, ip)
	}
	var chosen []netip.Addr
	for _, r := range reqs {
		ip, err := a.pickLocked(r, held, chosen, taken)
		if err != nil {
			return slices.Clone(held), err
		}
		chosen = append(chosen, ip)
	}
	a.setLocked(owner, chosen)
	return slices.Clone(chosen), nil
}

// pickLocked chooses the address for r.
func (a *Allocator) pickLocked(r Request, held, chosen []netip.Addr, taken func(netip.Addr, []netip.Addr) bool) (netip.Addr, error) {
	if r.IP.IsValid() {
		switch {
		case !a.pools.Contains(r.IP):
			return netip.Addr{}, fmt.Errorf("%s: %w", r.IP, ErrNotInPool)
		case taken(r.IP, chosen):
			return netip.Addr{}, fmt.Errorf("%s: %w by %s", r.IP, ErrInUse, a.owner[r.IP])
		}
		return r.IP, nil
	}
	for _, ip := range held {
		if familyOf(ip) == r.Family && !slices.Contains(chosen, ip) {
			return ip, nil
		}
	}
	if !a.pools.Has(r.Family) {
		return netip.Addr{}, fmt.Errorf("%w for %s", ErrNoPool, r.Family)
	}
	for _, rg := range a.pools {
		if rg.Family() != r.Family {
			continue
		}
		if ip, ok := firstFree(rg, func(ip netip.Addr) bool { return taken(ip, chosen) }); ok {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s %w", r.Family, ErrExhausted)
}

// firstFree returns the lowest address of rg that is not taken. It visits
// at most one address more than there are taken ones, so huge IPv6 ranges
// cost nothing.
func firstFree(rg Range, taken func(netip.Addr) bool) (netip.Addr, bool) {
	for ip := rg.First; ; ip = ip.Next() {
		if !taken(ip) {
			return ip, true
		}
		if ip == rg.Last {
			return netip.Addr{}, false
		}
	}
}

// Release frees every address of owner and returns them.
func (a *Allocator) Release(owner string) []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := a.byOwner[owner]
	a.setLocked(owner, nil)
	return held
}

// Assigned returns the addresses owner holds, in the order allocated.
func (a *Allocator) Assigned(owner string) []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.byOwner[owner])
}

// Owner returns who holds ip.
func (a *Allocator) Owner(ip netip.Addr) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.owner[ip]
	return o, ok
}

// Rebuild forgets every assignment and records the given ones in order, so
// the first owner listed wins an address claimed twice. Addresses outside
// the pools, claimed before, or second of their family for one owner are
// left out and returned as refused.
func (a *Allocator) Rebuild(assignments []Assignment) (refused []Assignment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.owner = map[netip.Addr]string{}
	a.byOwner = map[string][]netip.Addr{}
	for _, as := range assignments {
		var keep, drop []netip.Addr
		for _, ip := range as.IPs {
			_, claimed := a.owner[ip]
			dupFamily := slices.ContainsFunc(keep, func(k netip.Addr) bool { return familyOf(k) == familyOf(ip) })
			if claimed || dupFamily || !a.pools.Contains(ip) {
				drop = append(drop, ip)
				continue
			}
			keep = append(keep, ip)
		}
		a.setLocked(as.Owner, keep)
		if len(drop) > 0 {
			refused = append(refused, Assignment{Owner: as.Owner, IPs: drop})
		}
	}
	return refused
}

// setLocked makes ips the addresses of owner.
func (a *Allocator) setLocked(owner string, ips []netip.Addr) {
	for _, ip := range a.byOwner[owner] {
		delete(a.owner, ip)
	}
	if len(ips) == 0 {
		delete(a.byOwner, owner)
		return
	}
	for _, ip := range ips {
		a.owner[ip] = owner
	}
	a.byOwner[owner] = ips
}
