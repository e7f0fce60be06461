//go:build linux

package nftables

import (
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/snapshot"
)

// full rewrites the whole table: static objects, every Service, and the
// deletion of whatever is there but no longer wanted. leftovers is the
// table's listing if it was listed for this sync (empty: no table), else
// nil. Affinity sets are
// added, never flushed, so clients keep their endpoints across resyncs.
func (fp *familyProxier) full(tx txOps, snap *snapshot.Snapshot, leftovers map[string][]string) func() {
	fp.writeStatic(tx, snap.Node)
	names := sortedNames(snap.Services)
	all := make([]*serviceObjects, len(names))
	endpointMaps := map[string]struct{}{}
	for i, nn := range names {
		all[i] = fp.b.service(snap.Services[nn], snap.Endpoints[nn], snap.Node, fp.ids.get)
		for _, r := range all[i].slots {
			endpointMaps[r.mapName()] = struct{}{}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(endpointMaps)) {
		m := fp.endpointMap(name)
		tx.Add(m)
		tx.Flush(m)
	}
	// Chains that may exist get flushed before their rules are added;
	// new ones need not be (a command per chain fewer in a first sync).
	existing := map[string]struct{}{}
	for _, c := range leftovers["chain"] {
		existing[c] = struct{}{}
	}
	for _, ws := range fp.written {
		for c := range ws.chains {
			existing[c] = struct{}{}
		}
	}
	written := make(map[types.NamespacedName]*writtenService, len(snap.Services))
	owners := map[string]types.NamespacedName{}
	contested := map[string]map[types.NamespacedName]struct{}{}
	hairpin := map[netip.Addr]int{}
	var elems []*elem
	var slots []slotRange
	for i, nn := range names {
		objs := all[i]
		all[i] = nil
		ws := newWrittenService()
		for _, s := range objs.sets {
			tx.Add(fp.affinitySet(s))
			ws.sets[s.name] = struct{}{}
		}
		for _, c := range objs.chains {
			_, flush := existing[c.name]
			writeChain(tx, c, flush)
			ws.chains[c.name] = hashRules(c.rules)
		}
		for i := range objs.elems {
			e := &objs.elems[i]
			id := e.id()
			if _, dup := ws.wants[id]; dup {
				continue
			}
			ws.wants[id] = e
			if _, taken := owners[id]; taken {
				addContested(contested, id, nn)
				continue
			}
			owners[id] = nn
			elems = append(elems, e)
		}
		slots = append(slots, objs.slots...)
		ws.slots = objs.slots
		for _, a := range objs.hairpin {
			hairpin[a]++
		}
		ws.hairpin = objs.hairpin
		if !ws.empty() {
			written[nn] = ws
		}
	}
	// Elements after the rules: a rule binding a map walks the elements
	// it already has.
	for _, e := range elems {
		tx.Add(e.knft())
	}
	addBulkElements(tx, slots, sortedAddrs(hairpin))

	fp.deleteLeftBehind(tx, leftovers, written, endpointMaps)

	return func() {
		fp.written, fp.owners, fp.contested, fp.hairpin, fp.listed = written, owners, contested, hairpin, true
		fp.endpointMaps = endpointMaps
		keep := map[string]struct{}{}
		for _, ws := range written {
			for _, r := range ws.slots {
				keep[r.chain] = struct{}{}
			}
		}
		fp.ids.keepOnly(func(chain string) bool { _, ok := keep[chain]; return ok })
	}
}

// deleteLeftBehind deletes the chains, sets and maps an earlier run or an
// earlier sync left behind that the full sync about to commit (written,
// endpointMaps) does not write again, static objects apart: those in
// leftovers, the table's listing, when it was listed for this sync, else
// those the last successful sync wrote. Only the listing is trusted after
// a failure: deleting what memory says was written fails the whole
// transaction if someone else removed it.
func (fp *familyProxier) deleteLeftBehind(tx txOps, leftovers map[string][]string, written map[types.NamespacedName]*writtenService, endpointMaps map[string]struct{}) {
	staleChains, staleSets := map[string]struct{}{}, map[string]struct{}{}
	if leftovers == nil {
		for _, ws := range fp.written {
			for c := range ws.chains {
				staleChains[c] = struct{}{}
			}
			for s := range ws.sets {
				staleSets[s] = struct{}{}
			}
		}
		for m := range fp.endpointMaps {
			staleSets[m] = struct{}{}
		}
	}
	for _, c := range leftovers["chain"] {
		staleChains[c] = struct{}{}
	}
	for _, s := range leftovers["set"] {
		staleSets[s] = struct{}{}
	}
	for _, m := range leftovers["map"] {
		staleSets[m] = struct{}{}
	}
	for m := range endpointMaps {
		delete(staleSets, m)
	}
	for _, ws := range written {
		for c := range ws.chains {
			delete(staleChains, c)
		}
		for s := range ws.sets {
			delete(staleSets, s)
		}
	}
	for _, name := range staticNames {
		delete(staleChains, name)
		delete(staleSets, name)
	}
	isMap := map[string]bool{}
	for _, m := range leftovers["map"] {
		isMap[m] = true
	}
	for m := range fp.endpointMaps {
		isMap[m] = true
	}
	deleteStale(tx, slices.Sorted(maps.Keys(staleChains)), slices.Sorted(maps.Keys(staleSets)), isMap)
}
