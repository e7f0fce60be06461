//go:build linux

// Package nftables is the nftables proxy mode: it programs one "portal"
// table per IP family (ip and ip6) so the kernel sends connections for a
// Service's cluster IPs, NodePorts, externalIPs and load balancer VIPs to
// its endpoints. Every sync is one atomic transaction per family; after
// the first, a sync sends only what changed. It owns those two tables and
// nothing else: it must not touch other tables, conntrack (the core does
// that) or anything outside the kernel's nftables. knftables is injected,
// so tests check the resulting ruleset against knftables' fake; full
// and partial syncs go to the kernel as a netlink batch of the same
// ruleset (nlwriter.go), falling back to knftables.
package nftables

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/snapshot"
)

// Config configures the nftables mode.
type Config struct {
	// ClusterCIDRs are the pod CIDRs, at most one per family. Traffic from
	// outside them to a cluster IP is masqueraded; empty means unknown.
	ClusterCIDRs []netip.Prefix
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// BeforeFirstSync, if set, runs once before the first transaction;
	// the proxy uses it to remove the rules other Portal modes left.
	BeforeFirstSync func(ctx context.Context) error
}

// Proxier programs the portal tables. It is not safe for concurrent use;
// the proxy core calls it from one goroutine.
type Proxier struct {
	cfg      Config
	families []*familyProxier
	started  bool
}

// New returns a Proxier using the nft binary for IPv4 and IPv6. An IPv6
// table that cannot be created (IPv6 disabled) leaves the mode IPv4-only.
func New(cfg Config) (*Proxier, error) {
	nft4, err := knftables.New(knftables.IPv4Family, tableName)
	if err != nil {
		return nil, fmt.Errorf("nftables mode needs nft and CAP_NET_ADMIN: %w", err)
	}
	nft6, err := knftables.New(knftables.IPv6Family, tableName)
	if err != nil {
		klog.InfoS("IPv6 nftables unavailable; proxying IPv4 only", "err", err)
		nft6 = nil
	}
	p := NewWithInterfaces(cfg, nft4, nft6)
	for _, fp := range p.families {
		family := knftables.IPv4Family
		if fp.b.ip == "ip6" {
			family = knftables.IPv6Family
		}
		fp.forFullSync = func() (knftables.Interface, error) { return knftables.New(family, tableName) }
		fp.batch = newNetlinkWriter(family, tableName)
	}
	return p, nil
}

// NewWithInterfaces returns a Proxier using the given knftables interfaces
// (either may be nil to leave that family out), which must be for table
// "portal" of families ip and ip6.
func NewWithInterfaces(cfg Config, ipv4, ipv6 knftables.Interface) *Proxier {
	p := &Proxier{cfg: cfg}
	for _, f := range []struct {
		nft    knftables.Interface
		family snapshot.Family
	}{{ipv4, "IPv4"}, {ipv6, "IPv6"}} {
		if f.nft == nil {
			continue
		}
		var cidr netip.Prefix
		for _, c := range cfg.ClusterCIDRs {
			if snapshot.FamilyOf(c.Addr()) == f.family {
				cidr = c
			}
		}
		p.families = append(p.families, &familyProxier{
			b:   newBuilder(f.family, cidr, cfg.MasqueradeAll),
			nft: f.nft,
		})
	}
	return p
}

// Sync programs req's snapshot: everything when req.Full or on the first
// call, else only the Services in req.Changed. Each family is one
// transaction; a failed one leaves that table as it was.
func (p *Proxier) Sync(ctx context.Context, req snapshot.Request) error {
	if !p.started && p.cfg.BeforeFirstSync != nil {
		start := time.Now()
		err := p.cfg.BeforeFirstSync(ctx)
		klog.V(2).InfoS("Looked for other proxy modes' rules", "took", time.Since(start).Round(time.Millisecond))
		if err != nil {
			// Other modes' leftovers shadow or duplicate our rules but do
			// not stop ours from working: log, go on, retry next start.
			klog.ErrorS(err, "Could not remove other proxy modes' rules")
		}
	}
	p.started = true
	var errs []error
	for _, fp := range p.families {
		if err := fp.sync(ctx, req); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Cleanup deletes the portal tables. The Proxier forgets what it wrote, so
// a later Sync starts over with a full one.
func (p *Proxier) Cleanup(ctx context.Context) error {
	var errs []error
	for _, fp := range p.families {
		if err := DeleteTable(ctx, fp.nft); err != nil {
			errs = append(errs, err)
		}
		if fp.batch != nil {
			// The netlink writer forgets the table's sets with it.
			fp.batch.Wrote(&recording{ops: []op{{opDelete, &knftables.Table{}}}})
		}
		fp.reset()
	}
	return errors.Join(errs...)
}

// DeleteTable deletes nft's table if it exists.
func DeleteTable(ctx context.Context, nft knftables.Interface) error {
	tx := nft.NewTransaction()
	// nft 1.0.6 has no "destroy": add first so the delete cannot fail.
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	return nft.Run(ctx, tx)
}

// familyProxier programs one family's table and remembers what its last
// successful transaction wrote, which is what partial syncs diff against.
// A failed transaction changes nothing in the kernel, so that memory
// stays right.
type familyProxier struct {
	b   *builder
	nft knftables.Interface
	// batch, if set, writes syncs (see nlwriter.go); nft writes those
	// batch cannot encode or send.
	batch batchWriter
	// forFullSync, if set, returns a client for one full sync nft has to
	// write (netlink could not). knftables keeps the buffer of the largest
	// transaction it ran for good (14 MiB of text at 10,000 Services):
	// full syncs, rare, get a client of their own, which goes with its
	// buffer; nft serves the small partial ones netlink cannot write.
	forFullSync func() (knftables.Interface, error)

	// written is nil until the first successful sync.
	written map[types.NamespacedName]*writtenService
	// owners says which Service wrote each element of the shared maps
	// and sets. Two Services can want one key (the same externalIP and
	// port, say): the first in name order gets it, in full and partial
	// syncs alike.
	owners map[string]types.NamespacedName
	// contested lists, per element, the other Services that want it.
	contested map[string]map[types.NamespacedName]struct{}
	// hairpin counts the Services that use each endpoint address.
	hairpin map[netip.Addr]int
	// ids places chains in the shared endpoint maps.
	ids idAllocator
	// endpointMaps are the shared endpoint maps in the table.
	endpointMaps map[string]struct{}
	// listed is true once leftovers of an earlier run were looked for.
	listed bool
	// lastFullOps is the length of the last full sync's recording.
	lastFullOps int
}

// writtenService is what one Service has in the table.
type writtenService struct {
	chains map[string]uint64 // name -> hash of its rules
	sets   map[string]struct{}
	// wants holds every shared element the Service wants, by id; it
	// has in the table those whose owner it is.
	wants   map[string]*elem
	slots   []slotRange
	hairpin []netip.Addr
}

func (fp *familyProxier) reset() {
	fp.written, fp.owners, fp.contested, fp.hairpin, fp.listed = nil, nil, nil, nil, false
	fp.ids, fp.endpointMaps = idAllocator{}, nil
}

func (fp *familyProxier) sync(ctx context.Context, req snapshot.Request) (err error) {
	defer func() {
		if err != nil {
			// The table may not be what this proxier thinks (a batch
			// whose answer was lost, someone flushing the ruleset): the
			// full sync that follows lists it again.
			fp.listed = false
		}
	}()
	full := req.Full || fp.written == nil
	if !full {
		rec := &recording{}
		commit := fp.partial(rec, req.Snapshot, req.Changed)
		if _, err := fp.write(ctx, rec, func() knftables.Interface { return fp.nft }); err != nil {
			return err
		}
		commit()
		return nil
	}
	start := time.Now()
	var leftovers map[string][]string
	if !fp.listed {
		all, err := fp.nft.ListAll(ctx)
		if err != nil && !knftables.IsNotFound(err) {
			return fmt.Errorf("list %s table %s: %w", fp.b.ip, tableName, err)
		}
		leftovers = all
		if leftovers == nil {
			leftovers = map[string][]string{} // no table
		}
	}
	listed := time.Now()
	// Sized as the last full sync: growing it would copy 200,000
	// operations several times.
	rec := &recording{ops: make([]op, 0, fp.lastFullOps+fp.lastFullOps/8)}
	commit := fp.full(rec, req.Snapshot, leftovers)
	built := time.Now()
	via, err := fp.writeFull(ctx, rec)
	if err != nil {
		return err
	}
	commit()
	fp.lastFullOps = len(rec.ops)
	// Full syncs are rare (start, errors, once an hour) and slow: say
	// where the time went.
	klog.InfoS("Full sync", "family", fp.b.ip, "services", len(req.Snapshot.Services), "operations", rec.NumOperations(), "via", via,
		"list", listed.Sub(start).Round(time.Millisecond), "build", built.Sub(listed).Round(time.Millisecond), "write", time.Since(built).Round(time.Millisecond))
	return nil
}

// writeFull writes a full sync's operations, through netlink when it
// can, else through nft, and says which.
func (fp *familyProxier) writeFull(ctx context.Context, rec *recording) (string, error) {
	return fp.write(ctx, rec, func() knftables.Interface {
		if fp.forFullSync != nil {
			if n, err := fp.forFullSync(); err == nil {
				return n
			}
		}
		return fp.nft
	})
}

// write applies rec through netlink when it can, else through the nft
// client nft returns, and says which.
func (fp *familyProxier) write(ctx context.Context, rec *recording, nft func() knftables.Interface) (string, error) {
	if fp.batch != nil {
		err := fp.batch.Write(ctx, rec)
		if !errors.Is(err, errNotEncodable) && !errors.Is(err, errNotSent) {
			if err != nil {
				return "", fmt.Errorf("%s %s netlink transaction (%d operations): %w", fp.b.ip, tableName, rec.NumOperations(), err)
			}
			return "netlink", nil
		}
		klog.InfoS("Sync goes through nft", "family", fp.b.ip, "operations", rec.NumOperations(), "reason", err)
	}
	client := nft()
	tx := client.NewTransaction()
	rec.replay(tx)
	if err := fp.run(ctx, client, tx); err != nil {
		return "", err
	}
	if fp.batch != nil {
		fp.batch.Wrote(rec)
	}
	return "nft", nil
}

func (fp *familyProxier) run(ctx context.Context, nft knftables.Interface, tx *knftables.Transaction) error {
	if tx.NumOperations() == 0 {
		return nil
	}
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("%s %s transaction (%d operations): %w", fp.b.ip, tableName, tx.NumOperations(), err)
	}
	return nil
}

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
	for _, name := range sortedKeys(endpointMaps) {
		m := fp.endpointMap(name)
		tx.Add(m)
		tx.Flush(m)
	}
	// Chains that may exist get flushed before their rules are added;
	// new ones need not be (10,000 fewer commands in a first sync).
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
	deleteStale(tx, sortedKeys(staleChains), sortedKeys(staleSets), isMap)
}

// partial rewrites only the Services in changed, diffing each against
// what the last successful sync wrote for it.
func (fp *familyProxier) partial(tx txOps, snap *snapshot.Snapshot, changed map[types.NamespacedName]struct{}) func() {
	type plan struct {
		nn   types.NamespacedName
		old  *writtenService
		objs *serviceObjects
		ws   *writtenService
	}
	names := sortedNames(changed)
	plans := make([]plan, 0, len(names))
	planned := make(map[types.NamespacedName]*plan, len(names))
	for _, nn := range names {
		pl := plan{nn: nn, old: fp.written[nn], objs: fp.b.service(snap.Services[nn], snap.Endpoints[nn], snap.Node, fp.ids.get), ws: newWrittenService()}
		if pl.old == nil {
			pl.old = newWrittenService()
		}
		for i := range pl.objs.elems {
			e := &pl.objs.elems[i]
			if _, dup := pl.ws.wants[e.id()]; !dup {
				pl.ws.wants[e.id()] = e
			}
		}
		plans = append(plans, pl)
	}
	for i := range plans {
		planned[plans[i].nn] = &plans[i]
	}

	// Shared elements: for every id a changed Service wanted or wants,
	// work out who should own it now (the first wanter by name) with
	// which value, and change the table where that differs.
	wantsOf := func(nn types.NamespacedName) map[string]*elem {
		if pl := planned[nn]; pl != nil {
			return pl.ws.wants
		}
		if ws := fp.written[nn]; ws != nil {
			return ws.wants
		}
		return nil
	}
	affected := map[string]struct{}{}
	for _, pl := range plans {
		for id := range pl.old.wants {
			affected[id] = struct{}{}
		}
		for id := range pl.ws.wants {
			affected[id] = struct{}{}
		}
	}
	type ownership struct {
		owner     types.NamespacedName
		hasOwner  bool
		contested map[types.NamespacedName]struct{}
	}
	newOwners := make(map[string]ownership, len(affected))
	var elemDeletes, elemAdds []*elem
	for _, id := range sortedKeys(affected) {
		wanters := map[types.NamespacedName]struct{}{}
		if o, ok := fp.owners[id]; ok {
			wanters[o] = struct{}{}
		}
		for w := range fp.contested[id] {
			wanters[w] = struct{}{}
		}
		for _, pl := range plans {
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
		var newElem *elem
		if next.hasOwner {
			newElem = wantsOf(next.owner)[id]
			delete(wanters, next.owner)
			if len(wanters) > 0 {
				next.contested = wanters
			}
		}
		var oldElem *elem
		if o, ok := fp.owners[id]; ok {
			oldElem = fp.written[o].wants[id]
		}
		switch {
		case oldElem != nil && newElem != nil && oldElem.valueString() == newElem.valueString():
			// Same key, same value: nothing to do, whoever owns it.
		default:
			if oldElem != nil {
				elemDeletes = append(elemDeletes, oldElem)
			}
			if newElem != nil {
				elemAdds = append(elemAdds, newElem)
			}
		}
		newOwners[id] = next
	}

	// New endpoint maps come first: the rules below use them.
	newMaps := map[string]struct{}{}
	for _, pl := range plans {
		for _, r := range pl.objs.slots {
			if _, ok := fp.endpointMaps[r.mapName()]; !ok {
				newMaps[r.mapName()] = struct{}{}
			}
		}
	}
	for _, m := range sortedKeys(newMaps) {
		tx.Add(fp.endpointMap(m))
	}

	hairpinDelta := map[netip.Addr]int{}
	var staleChains, staleSets []string
	var slotDeletes, slotAdds []*knftables.Element
	var releasedIDs []string
	for i := range plans {
		pl := &plans[i]
		del, add, released := slotDiff(pl.old.slots, pl.objs.slots)
		slotDeletes, slotAdds = append(slotDeletes, del...), append(slotAdds, add...)
		releasedIDs = append(releasedIDs, released...)
		pl.ws.slots = pl.objs.slots
		for _, s := range pl.objs.sets {
			pl.ws.sets[s.name] = struct{}{}
			if _, had := pl.old.sets[s.name]; !had {
				tx.Add(fp.affinitySet(s))
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
				staleChains = append(staleChains, c)
			}
		}
		for s := range pl.old.sets {
			if _, keep := pl.ws.sets[s]; !keep {
				staleSets = append(staleSets, s)
			}
		}
		for _, a := range pl.old.hairpin {
			hairpinDelta[a]--
		}
		for _, a := range pl.objs.hairpin {
			hairpinDelta[a]++
		}
		pl.ws.hairpin = pl.objs.hairpin
	}
	for _, e := range elemDeletes {
		tx.Delete(e.knft())
	}
	for _, e := range elemAdds {
		tx.Add(e.knft())
	}
	for _, e := range slotDeletes {
		tx.Delete(e)
	}
	for _, e := range slotAdds {
		tx.Add(e)
	}
	hairpinAfter := map[netip.Addr]int{}
	for _, a := range sortedAddrs(hairpinDelta) {
		before := fp.hairpin[a]
		after := before + hairpinDelta[a]
		hairpinAfter[a] = after
		switch {
		case before == 0 && after > 0:
			tx.Add(fp.hairpinElem(a))
		case before > 0 && after <= 0:
			tx.Delete(fp.hairpinElem(a))
		}
	}
	sort.Strings(staleChains)
	sort.Strings(staleSets)
	deleteStale(tx, staleChains, staleSets, nil)

	return func() {
		for _, pl := range plans {
			if pl.ws.empty() {
				delete(fp.written, pl.nn)
			} else {
				fp.written[pl.nn] = pl.ws
			}
		}
		for id, o := range newOwners {
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
		for a, n := range hairpinAfter {
			if n <= 0 {
				delete(fp.hairpin, a)
			} else {
				fp.hairpin[a] = n
			}
		}
		for m := range newMaps {
			fp.endpointMaps[m] = struct{}{}
		}
		// Ids go back to the pool only now, so no chain took over a
		// slot range its old elements still filled in this transaction.
		for _, c := range releasedIDs {
			fp.ids.release(c)
		}
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

// deleteStale removes chains and sets no Service wants. The chains are
// flushed first (stale chains can jump to each other and use the stale
// sets), then the sets and maps go (a leftover map can point at a stale
// chain), then the chains.
func deleteStale(tx txOps, chains, sets []string, isMap map[string]bool) {
	for _, c := range chains {
		tx.Flush(&knftables.Chain{Name: c})
	}
	for _, s := range sets {
		if isMap[s] {
			tx.Delete(&knftables.Map{Name: s})
		} else {
			tx.Delete(&knftables.Set{Name: s})
		}
	}
	for _, c := range chains {
		tx.Delete(&knftables.Chain{Name: c})
	}
}

func writeChain(tx txOps, c chain, flush bool) {
	tx.Add(&knftables.Chain{Name: c.name})
	if flush {
		tx.Flush(&knftables.Chain{Name: c.name})
	}
	for _, r := range c.rules {
		tx.Add(&knftables.Rule{Chain: c.name, Rule: r})
	}
}

func (fp *familyProxier) affinitySet(s affinitySet) *knftables.Set {
	return &knftables.Set{
		Name:    s.name,
		Type:    fp.b.addrType,
		Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		Timeout: &s.timeout,
	}
}

// endpointMap returns the shared endpoint map called name.
func (fp *familyProxier) endpointMap(name string) *knftables.Map {
	proto := strings.TrimPrefix(name, endpointMapPrefix)
	proto = proto[:strings.IndexByte(proto, '-')]
	return &knftables.Map{
		Name:   name,
		TypeOf: "numgen random mod 1 : " + fp.b.ip + " daddr . " + proto + " dport",
	}
}

func (fp *familyProxier) hairpinElem(a netip.Addr) *knftables.Element { return hairpinElem(a) }

func hairpinElem(a netip.Addr) *knftables.Element {
	s := a.String()
	return &knftables.Element{Set: hairpinSet, Key: []string{s, s}}
}

func (e *elem) knft() *knftables.Element {
	if e.isMap {
		return &knftables.Element{Map: e.container, Key: e.key, Value: e.value}
	}
	return &knftables.Element{Set: e.container, Key: e.key}
}

func newWrittenService() *writtenService {
	return &writtenService{
		chains: map[string]uint64{},
		sets:   map[string]struct{}{},
		wants:  map[string]*elem{},
	}
}

func (ws *writtenService) empty() bool {
	return len(ws.chains) == 0 && len(ws.sets) == 0 && len(ws.wants) == 0 && len(ws.slots) == 0 && len(ws.hairpin) == 0
}

func addContested(m map[string]map[types.NamespacedName]struct{}, id string, nn types.NamespacedName) {
	if m[id] == nil {
		m[id] = map[types.NamespacedName]struct{}{}
	}
	m[id][nn] = struct{}{}
}

func hashRules(rules []string) uint64 {
	h := fnv.New64a()
	for _, r := range rules {
		h.Write([]byte(r))
		h.Write([]byte{'\n'})
	}
	return h.Sum64()
}

func sortedNames[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for nn := range m {
		out = append(out, nn)
	}
	slices.SortFunc(out, compareNames)
	return out
}

func compareNames(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func sortedAddrs(m map[netip.Addr]int) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
