package allocator

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Op is the allocation side of one Service write. Finish must be called
// with the outcome of the write: on success it releases what the Service
// no longer holds, on failure what this write reserved.
type Op struct {
	a        *Allocator
	owner    string
	reserved []Key
	release  []Key
	dryRun   bool
}

// Finish settles the reservations once the Service write is done.
func (op *Op) Finish(ctx context.Context, success bool) {
	if op == nil || op.dryRun {
		return
	}
	keys := op.reserved
	if success {
		keys = op.release
	}
	op.a.releaseKeys(ctx, keys, op.owner)
}

// Keep takes held, what the stored Service holds, out of what a failed
// write gives back: a write reported failed may have landed after all.
func (op *Op) Keep(held []Key) {
	if op == nil {
		return
	}
	op.reserved = slices.DeleteFunc(op.reserved, func(k Key) bool { return slices.Contains(held, k) })
}

// slot is one item a Service needs that it did not name: a cluster IP of a
// family, or a node port. set writes the chosen value into the Service.
type slot struct {
	family corev1.IPFamily // "" for a port
	set    func(k Key)
	// field and index name the Service field the value goes to, to
	// report when its range is full.
	field Field
	index int
}

// claim is an item a Service names (or already holds), with the field that
// named it, to report when it cannot be had.
type claim struct {
	key Key
	req RequestError
}

// refuse returns c's RequestError with reason err.
func (c claim) refuse(err error) *RequestError {
	r := c.req
	r.Err = err
	return &r
}

// Owner is how reservations name the Service holding them.
func Owner(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// Allocate reserves what svc needs: for a create old is nil; for an update,
// what old holds and svc keeps is kept, what svc drops is released when the
// write succeeds. It fills in the chosen cluster IPs and ports.
//
// A value svc names that it cannot have is refused with RequestErrors. A
// range with nothing left gives a *FullError (errors.Is ErrFull), a family without a range
// ErrNoRange; any other error is the store's, or ErrCollided.
func (a *Allocator) Allocate(ctx context.Context, svc, old *corev1.Service, dryRun bool) (*Op, error) {
	held := map[Key]bool{}
	if old != nil {
		for _, k := range Keys(old) {
			held[k] = true
		}
	}
	claims, slots, refused := a.plan(svc, held)
	if len(refused) > 0 {
		return nil, refused
	}
	op := &Op{a: a, owner: Owner(svc), dryRun: dryRun}
	if err := a.reserve(ctx, op, claims, slots); err != nil {
		return nil, err
	}
	if old != nil {
		keep := map[Key]bool{}
		for _, k := range Keys(svc) {
			keep[k] = true
		}
		for k := range held {
			if !keep[k] {
				op.release = append(op.release, k)
			}
		}
	}
	return op, nil
}

// Release frees everything svc holds (after it is deleted).
func (a *Allocator) Release(ctx context.Context, svc *corev1.Service) {
	a.releaseKeys(ctx, Keys(svc), Owner(svc))
}

// ReleaseUnheld frees those of keys, held for svc, that the stored svc
// does not hold.
func (a *Allocator) ReleaseUnheld(ctx context.Context, svc *corev1.Service, keys []Key) {
	held := Keys(svc)
	a.releaseKeys(ctx, slices.DeleteFunc(slices.Clone(keys), func(k Key) bool { return slices.Contains(held, k) }), Owner(svc))
}

func (a *Allocator) releaseKeys(ctx context.Context, keys []Key, owner string) {
	if len(keys) == 0 {
		return
	}
	// Release even when the request's context is gone: a leak would wait
	// for the repair loop.
	ctx = context.WithoutCancel(ctx)
	if err := a.store.Release(ctx, keys, owner); err != nil {
		return // the repair loop frees it later
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		a.freeLocked(k)
	}
}

// plan lists the items svc names that it does not hold yet (claims) and the
// items it needs but does not name (slots).
func (a *Allocator) plan(svc *corev1.Service, held map[Key]bool) ([]claim, []*slot, RequestErrors) {
	var claims []claim
	var slots []*slot
	var errs RequestErrors
	ipClaims, ipSlots, ipErrs := a.planIPs(svc, held)
	claims, slots, errs = append(claims, ipClaims...), append(slots, ipSlots...), append(errs, ipErrs...)
	portClaims, portSlots, portErrs := a.planPorts(svc, held)
	claims, slots, errs = append(claims, portClaims...), append(slots, portSlots...), append(errs, portErrs...)
	return claims, slots, errs
}

func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

func (a *Allocator) planIPs(svc *corev1.Service, held map[Key]bool) ([]claim, []*slot, RequestErrors) {
	if !needsClusterIP(svc) {
		return nil, nil, nil
	}
	var claims []claim
	var slots []*slot
	var errs RequestErrors
	for i, fam := range svc.Spec.IPFamilies {
		if i < len(svc.Spec.ClusterIPs) && svc.Spec.ClusterIPs[i] != "" {
			ipStr := svc.Spec.ClusterIPs[i]
			ip, err := netip.ParseAddr(ipStr)
			if err != nil {
				continue // validation reports it
			}
			k := ipKey(ip)
			if held[k] {
				continue
			}
			c := claim{key: k, req: RequestError{Field: FieldClusterIP, Index: i, IP: ipStr}}
			if err := a.checkIP(ip); err != nil {
				errs = append(errs, c.refuse(err))
				continue
			}
			claims = append(claims, c)
			continue
		}
		i := i
		slots = append(slots, &slot{family: fam, field: FieldClusterIP, index: i, set: func(k Key) {
			for len(svc.Spec.ClusterIPs) <= i {
				svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, "")
			}
			svc.Spec.ClusterIPs[i] = addrOf(k).String()
			svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
		}})
	}
	return claims, slots, errs
}

func needsNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

func needsHealthCheckNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func (a *Allocator) planPorts(svc *corev1.Service, held map[Key]bool) ([]claim, []*slot, RequestErrors) {
	var claims []claim
	var slots []*slot
	var errs RequestErrors
	claimed := map[Key]bool{}
	addClaim := func(req RequestError) {
		c := claim{key: portKey(int(req.Port)), req: req}
		if held[c.key] || claimed[c.key] {
			return
		}
		claimed[c.key] = true
		if err := a.checkPort(int(req.Port)); err != nil {
			errs = append(errs, c.refuse(err))
			return
		}
		claims = append(claims, c)
	}
	isLB := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if needsNodePorts(svc) || isLB {
		// The same service port number under TCP and UDP shares one node
		// port, as upstream does.
		byPort := map[int32]*slot{}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				addClaim(RequestError{Field: FieldNodePort, Index: i, Port: p.NodePort})
				continue
			}
			if !needsNodePorts(svc) {
				continue // LoadBalancer without node ports: only named ones
			}
			if s, ok := byPort[p.Port]; ok {
				prev := s.set
				s.set = func(k Key) { prev(k); p.NodePort = int32(portOf(k)) }
				continue
			}
			if np := sharedNodePort(svc, p); np != 0 {
				p.NodePort = np
				continue
			}
			s := &slot{field: FieldNodePort, index: i, set: func(k Key) { p.NodePort = int32(portOf(k)) }}
			byPort[p.Port] = s
			slots = append(slots, s)
		}
	}
	if needsHealthCheckNodePort(svc) {
		if hc := svc.Spec.HealthCheckNodePort; hc != 0 {
			addClaim(RequestError{Field: FieldHealthCheckNodePort, Port: hc})
		} else {
			slots = append(slots, &slot{field: FieldHealthCheckNodePort,
				set: func(k Key) { svc.Spec.HealthCheckNodePort = int32(portOf(k)) }})
		}
	}
	return claims, slots, errs
}

// sharedNodePort returns the node port another entry with the same port
// number already names, so TCP and UDP of one port share it.
func sharedNodePort(svc *corev1.Service, p *corev1.ServicePort) int32 {
	for _, q := range svc.Spec.Ports {
		if q.Port == p.Port && q.NodePort != 0 {
			return q.NodePort
		}
	}
	return 0
}

// reserve picks values for the slots and records claims and picks in the
// store in one transaction, retrying picks another API server took first.
func (a *Allocator) reserve(ctx context.Context, op *Op, claims []claim, slots []*slot) error {
	byKey := map[Key]claim{}
	for _, c := range claims {
		byKey[c.key] = c
	}
	for attempt := 0; ; attempt++ {
		picks, err := a.pick(slots, claims)
		if err != nil {
			return err
		}
		keys := make([]Key, 0, len(claims)+len(picks))
		for _, c := range claims {
			keys = append(keys, c.key)
		}
		keys = append(keys, picks...)
		taken, err := a.tryReserve(ctx, op, keys, len(claims))
		if errors.Is(err, errRaced) && attempt < 10 {
			a.unpick(picks)
			continue
		}
		if err != nil {
			a.unpick(picks)
			return err
		}
		if len(taken) == 0 {
			for i, s := range slots {
				s.set(picks[i])
			}
			if op.dryRun {
				a.unpick(picks)
				return nil
			}
			op.reserved = append(op.reserved, keys...)
			return nil
		}
		var errs RequestErrors
		for _, k := range taken {
			if c, ok := byKey[k]; ok {
				reason := ErrAllocated
				if addrOf(k) == (netip.Addr{}) {
					reason = ErrPortAllocated
				}
				errs = append(errs, c.refuse(reason))
			}
		}
		// Picks that were not taken go back; taken ones stay marked.
		a.unpick(slices.DeleteFunc(picks, func(k Key) bool { return slices.Contains(taken, k) }))
		if len(errs) > 0 {
			return errs
		}
		if attempt == 10 {
			return ErrCollided
		}
		if attempt >= 2 {
			// The bitmaps lag behind other API servers more than a few
			// picks: reload them from the store.
			if owners, _, err := a.store.List(ctx); err == nil {
				a.reset(owners)
			}
		}
	}
}

// pick takes free values for slots, none of them a value the same Service
// claims by name (the claims are not marked taken until they are reserved).
func (a *Allocator) pick(slots []*slot, claims []claim) ([]Key, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range claims {
		if bits, i, ok := a.locateLocked(c.key); ok && !bits.Has(i) {
			bits.Set(i)
			defer bits.Clear(i)
		}
	}
	picks := make([]Key, 0, len(slots))
	for _, s := range slots {
		k, err := a.pickLocked(s)
		if err != nil {
			for _, p := range picks {
				a.freeLocked(p)
			}
			return nil, err
		}
		picks = append(picks, k)
	}
	return picks, nil
}

func (a *Allocator) unpick(keys []Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		a.freeLocked(k)
	}
}

// tryReserve records keys in the store. A dry run records nothing and only
// checks the claims against what is known to be taken (picks come from
// free bits, so they are free).
func (a *Allocator) tryReserve(ctx context.Context, op *Op, keys []Key, nClaims int) ([]Key, error) {
	if op.dryRun {
		a.mu.Lock()
		defer a.mu.Unlock()
		var taken []Key
		for _, k := range keys[:nClaims] {
			if bits, i, ok := a.locateLocked(k); ok && bits.Has(i) {
				taken = append(taken, k)
			}
		}
		return taken, nil
	}
	taken, err := a.store.Reserve(ctx, keys, op.owner)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	marked := taken
	if len(taken) == 0 {
		marked = keys
	}
	for _, k := range marked {
		a.markLocked(k, true)
	}
	return taken, nil
}

// Keys lists the reservations a stored Service holds.
func Keys(svc *corev1.Service) []Key {
	var keys []Key
	if needsClusterIP(svc) {
		for _, s := range svc.Spec.ClusterIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				keys = append(keys, ipKey(ip))
			}
		}
	}
	seen := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !seen[p.NodePort] {
			seen[p.NodePort] = true
			keys = append(keys, portKey(int(p.NodePort)))
		}
	}
	if hc := svc.Spec.HealthCheckNodePort; hc != 0 && !seen[hc] {
		keys = append(keys, portKey(int(hc)))
	}
	return keys
}

// Dropped lists what an update's Service no longer holds, given back by
// Finish on success or later by ReleaseUnheld.
func (op *Op) Dropped() []Key {
	if op == nil {
		return nil
	}
	return op.release
}

// Reserved lists what this write reserved, to name in logs.
func (op *Op) Reserved() []Key {
	if op == nil {
		return nil
	}
	return op.reserved
}
