//go:build linux

package nftables

import (
	"maps"
	"net/netip"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/snapshot"
)

// servicePlan is one changed Service in a partial sync: what the last
// successful sync wrote for it, what it wants now, and what it will have
// written once this sync commits.
type servicePlan struct {
	nn   types.NamespacedName
	old  *writtenService
	objs *serviceObjects
	ws   *writtenService
}

// ownership is who owns a shared element after a partial sync, and which
// other Services want it.
type ownership struct {
	owner     types.NamespacedName
	hasOwner  bool
	contested map[types.NamespacedName]struct{}
}

// partialSync is one partial sync being built: the steps below fill it
// in, and commit makes what it wrote the proxier's memory.
type partialSync struct {
	fp      *familyProxier
	plans   []servicePlan
	planned map[types.NamespacedName]*servicePlan

	newOwners              map[string]ownership
	elemDeletes, elemAdds  []*elem
	newMaps                map[string]struct{}
	hairpinDelta           map[netip.Addr]int
	hairpinAfter           map[netip.Addr]int
	staleChains, staleSets []string
	slotDeletes, slotAdds  []*knftables.Element
	releasedIDs            []string
}

// partial rewrites only the Services in changed, diffing each against
// what the last successful sync wrote for it. The returned func, called
// once the transaction succeeded, makes the proxier remember it.
func (fp *familyProxier) partial(tx txOps, snap *snapshot.Snapshot, changed map[types.NamespacedName]struct{}) func() {
	ps := &partialSync{fp: fp}
	ps.plan(snap, changed)
	ps.reassignElements()
	ps.addNewMaps(tx)
	ps.rewriteServices(tx)
	ps.writeElements(tx)
	ps.writeHairpins(tx)
	sort.Strings(ps.staleChains)
	sort.Strings(ps.staleSets)
	deleteStale(tx, ps.staleChains, ps.staleSets, nil)
	return ps.commit
}

// plan builds each changed Service's objects, in name order, and the
// shared elements it wants.
func (ps *partialSync) plan(snap *snapshot.Snapshot, changed map[types.NamespacedName]struct{}) {
	fp := ps.fp
	names := sortedNames(changed)
	ps.plans = make([]servicePlan, 0, len(names))
	ps.planned = make(map[types.NamespacedName]*servicePlan, len(names))
	for _, nn := range names {
		pl := servicePlan{nn: nn, old: fp.written[nn], objs: fp.b.service(snap.Services[nn], snap.Endpoints[nn], snap.Node, fp.ids.get), ws: newWrittenService()}
		if pl.old == nil {
			pl.old = newWrittenService()
		}
		for i := range pl.objs.elems {
			e := &pl.objs.elems[i]
			if _, dup := pl.ws.wants[e.id()]; !dup {
				pl.ws.wants[e.id()] = e
			}
		}
		ps.plans = append(ps.plans, pl)
	}
	for i := range ps.plans {
		ps.planned[ps.plans[i].nn] = &ps.plans[i]
	}
}

// wantsOf returns the shared elements nn wants after this sync.
func (ps *partialSync) wantsOf(nn types.NamespacedName) map[string]*elem {
	if pl := ps.planned[nn]; pl != nil {
		return pl.ws.wants
	}
	if ws := ps.fp.written[nn]; ws != nil {
		return ws.wants
	}
	return nil
}

// reassignElements works out, for every shared element a changed Service
// wanted or wants, who owns it now (the first wanter by name) with which
// value, and which elements the table must lose and gain for that.
func (ps *partialSync) reassignElements() {
	affected := map[string]struct{}{}
	for _, pl := range ps.plans {
		for id := range pl.old.wants {
			affected[id] = struct{}{}
		}
		for id := range pl.ws.wants {
			affected[id] = struct{}{}
		}
	}
	ps.newOwners = make(map[string]ownership, len(affected))
	for _, id := range slices.Sorted(maps.Keys(affected)) {
		next := ps.nextOwner(id)
		var newElem *elem
		if next.hasOwner {
			newElem = ps.wantsOf(next.owner)[id]
		}
		var oldElem *elem
		if o, ok := ps.fp.owners[id]; ok {
			oldElem = ps.fp.written[o].wants[id]
		}
		switch {
		case oldElem != nil && newElem != nil && oldElem.valueString() == newElem.valueString():
			// Same key, same value: nothing to do, whoever owns it.
		default:
			if oldElem != nil {
				ps.elemDeletes = append(ps.elemDeletes, oldElem)
			}
			if newElem != nil {
				ps.elemAdds = append(ps.elemAdds, newElem)
			}
		}
		ps.newOwners[id] = next
	}
}

// nextOwner returns who owns the shared element id after this sync: the
// first by name of the Services that want it, the others contesting it.
func (ps *partialSync) nextOwner(id string) ownership {
	wanters := map[types.NamespacedName]struct{}{}
	if o, ok := ps.fp.owners[id]; ok {
		wanters[o] = struct{}{}
	}
	for w := range ps.fp.contested[id] {
		wanters[w] = struct{}{}
	}
	for _, pl := range ps.plans {
		if _, ok := pl.ws.wants[id]; ok {
			wanters[pl.nn] = struct{}{}
		} else {
			delete(wanters, pl.nn)
		}
	}
	var next ownership
	for w := range wanters {
		if !next.hasOwner || compareNames(w, next.owner) < 0 {
			next.owner, next.hasOwner = w, true
		}
	}
	if next.hasOwner {
		delete(wanters, next.owner)
		if len(wanters) > 0 {
			next.contested = wanters
		}
	}
	return next
}

// addNewMaps adds the endpoint maps the changed Services need and the
// table does not have yet. They come first: the rules use them.
func (ps *partialSync) addNewMaps(tx txOps) {
	ps.newMaps = map[string]struct{}{}
	for _, pl := range ps.plans {
		for _, r := range pl.objs.slots {
			if _, ok := ps.fp.endpointMaps[r.mapName()]; !ok {
				ps.newMaps[r.mapName()] = struct{}{}
			}
		}
	}
	for _, m := range slices.Sorted(maps.Keys(ps.newMaps)) {
		tx.Add(ps.fp.endpointMap(m))
	}
}

// rewriteServices writes each changed Service's affinity sets and the
// chains whose rules changed, and collects what it no longer has: stale
// chains and sets, endpoint slots, hairpin addresses.
func (ps *partialSync) rewriteServices(tx txOps) {
	ps.hairpinDelta = map[netip.Addr]int{}
	for i := range ps.plans {
		pl := &ps.plans[i]
		del, add, released := slotDiff(pl.old.slots, pl.objs.slots)
		ps.slotDeletes, ps.slotAdds = append(ps.slotDeletes, del...), append(ps.slotAdds, add...)
		ps.releasedIDs = append(ps.releasedIDs, released...)
		pl.ws.slots = pl.objs.slots
		for _, s := range pl.objs.sets {
			pl.ws.sets[s.name] = struct{}{}
			if _, had := pl.old.sets[s.name]; !had {
				tx.Add(ps.fp.affinitySet(s))
			}
		}
		for _, c := range pl.objs.chains {
			h := hashRules(c.rules)
			pl.ws.chains[c.name] = h
			old, had := pl.old.chains[c.name]
			if had && old == h {
				continue
			}
			writeChain(tx, c, had)
		}
		for c := range pl.old.chains {
			if _, keep := pl.ws.chains[c]; !keep {
				ps.staleChains = append(ps.staleChains, c)
			}
		}
		for s := range pl.old.sets {
			if _, keep := pl.ws.sets[s]; !keep {
				ps.staleSets = append(ps.staleSets, s)
			}
		}
		for _, a := range pl.old.hairpin {
			ps.hairpinDelta[a]--
		}
		for _, a := range pl.objs.hairpin {
			ps.hairpinDelta[a]++
		}
		pl.ws.hairpin = pl.objs.hairpin
	}
}

// writeElements writes the shared element and endpoint slot changes.
func (ps *partialSync) writeElements(tx txOps) {
	for _, e := range ps.elemDeletes {
		tx.Delete(e.knft())
	}
	for _, e := range ps.elemAdds {
		tx.Add(e.knft())
	}
	for _, e := range ps.slotDeletes {
		tx.Delete(e)
	}
	for _, e := range ps.slotAdds {
		tx.Add(e)
	}
}

// writeHairpins adds the hairpin addresses the first Service started
// using and deletes those the last one stopped using.
func (ps *partialSync) writeHairpins(tx txOps) {
	ps.hairpinAfter = map[netip.Addr]int{}
	for _, a := range sortedAddrs(ps.hairpinDelta) {
		before := ps.fp.hairpin[a]
		after := before + ps.hairpinDelta[a]
		ps.hairpinAfter[a] = after
		switch {
		case before == 0 && after > 0:
			tx.Add(ps.fp.hairpinElem(a))
		case before > 0 && after <= 0:
			tx.Delete(ps.fp.hairpinElem(a))
		}
	}
}

// commit makes what the sync wrote the proxier's memory.
func (ps *partialSync) commit() {
	fp := ps.fp
	for _, pl := range ps.plans {
		if pl.ws.empty() {
			delete(fp.written, pl.nn)
		} else {
			fp.written[pl.nn] = pl.ws
		}
	}
	for id, o := range ps.newOwners {
		if o.hasOwner {
			fp.owners[id] = o.owner
		} else {
			delete(fp.owners, id)
		}
		if o.contested != nil {
			fp.contested[id] = o.contested
		} else {
			delete(fp.contested, id)
		}
	}
	for a, n := range ps.hairpinAfter {
		if n <= 0 {
			delete(fp.hairpin, a)
		} else {
			fp.hairpin[a] = n
		}
	}
	for m := range ps.newMaps {
		fp.endpointMaps[m] = struct{}{}
	}
	// Ids go back to the pool only now, so no chain took over a slot
	// range its old elements still filled in this transaction.
	for _, c := range ps.releasedIDs {
		fp.ids.release(c)
	}
}

// slotDiff returns the endpoint map elements to delete and add to go from
// a Service's old slot ranges to its new ones, and the chains that no
// longer have one. A chain whose range stayed put changes only the slots
// whose endpoint changed.
func slotDiff(old, cur []slotRange) (del, add []*knftables.Element, released []string) {
	for _, o := range old {
		n, ok := findSlots(cur, o.chain)
		if !ok {
			released = append(released, o.chain)
		}
		if !ok || n.id != o.id || n.proto != o.proto {
			for i := range o.eps {
				del = append(del, o.elem(i))
			}
			continue
		}
		for i := range o.eps {
			if i >= len(n.eps) || n.eps[i] != o.eps[i] {
				del = append(del, o.elem(i))
			}
		}
	}
	for _, n := range cur {
		o, ok := findSlots(old, n.chain)
		same := ok && n.id == o.id && n.proto == o.proto
		for i := range n.eps {
			if !same || i >= len(o.eps) || o.eps[i] != n.eps[i] {
				add = append(add, n.elem(i))
			}
		}
	}
	return del, add, released
}
