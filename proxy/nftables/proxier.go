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
// ruleset (package netlink), falling back to knftables. The netlink writer
// mirrors one nft release and is used only when that release is the one
// running (nftversion.go).
package nftables

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/family"
	"portal.dev/portal/proxy/nftables/netlink"
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
	set family.Set[*familyProxier]
	// readCounters, if set, replaces the kernel for Traffic (tests).
	readCounters func(ctx context.Context, family string) ([]netlink.RuleCounter, error)
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
	for _, fp := range p.set.Families {
		fam := knftables.IPv4Family
		if fp.b.ip == "ip6" {
			fam = knftables.IPv6Family
		}
		fp.forFullSync = func() (knftables.Interface, error) { return knftables.New(fam, tableName) }
	}
	p.useNetlink(netlink.NFTVersion())
	return p, nil
}

// NewWithInterfaces returns a Proxier using the given knftables interfaces
// (either may be nil to leave that family out), which must be for table
// "portal" of families ip and ip6.
func NewWithInterfaces(cfg Config, ipv4, ipv6 knftables.Interface) *Proxier {
	p := &Proxier{set: family.Set[*familyProxier]{BeforeFirstSync: cfg.BeforeFirstSync}}
	for _, f := range []struct {
		nft    knftables.Interface
		family snapshot.Family
	}{{ipv4, "IPv4"}, {ipv6, "IPv6"}} {
		if f.nft == nil {
			continue
		}
		cidr := family.ClusterCIDR(cfg.ClusterCIDRs, f.family)
		p.set.Families = append(p.set.Families, &familyProxier{
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
	return p.set.Sync(ctx, req)
}

// Cleanup deletes the portal tables. The Proxier forgets what it wrote, so
// a later Sync starts over with a full one.
func (p *Proxier) Cleanup(ctx context.Context) error { return p.set.Cleanup(ctx) }

// Cleanup deletes the family's table and forgets what it wrote.
func (fp *familyProxier) Cleanup(ctx context.Context) error {
	err := DeleteTable(ctx, fp.nft)
	if fp.batch != nil {
		// The netlink writer forgets the table's sets with it.
		var rec netlink.Recording
		rec.Delete(&knftables.Table{})
		fp.batch.Wrote(&rec)
	}
	fp.reset()
	return err
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
	// batch, if set, writes syncs (see package netlink); nft writes those
	// batch cannot encode or send.
	batch batchWriter
	// forFullSync, if set, returns a client for one full sync nft has to
	// write (netlink could not). knftables keeps the buffer of the largest
	// transaction it ran for good (megabytes of text in a big cluster):
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

// Sync programs req for the family in one transaction.
func (fp *familyProxier) Sync(ctx context.Context, req snapshot.Request) (err error) {
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
		rec := &netlink.Recording{}
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
	// Sized as the last full sync: growing it would copy a big
	// cluster's hundreds of thousands of operations several times.
	rec := netlink.NewRecording(fp.lastFullOps + fp.lastFullOps/8)
	commit := fp.full(rec, req.Snapshot, leftovers)
	built := time.Now()
	via, err := fp.writeFull(ctx, rec)
	if err != nil {
		return err
	}
	commit()
	fp.lastFullOps = rec.Len()
	// Full syncs are rare (start, errors, once an hour) and slow: say
	// where the time went.
	klog.InfoS("Full sync", "family", fp.b.ip, "services", len(req.Snapshot.Services), "operations", rec.NumOperations(), "via", via,
		"list", listed.Sub(start).Round(time.Millisecond), "build", built.Sub(listed).Round(time.Millisecond), "write", time.Since(built).Round(time.Millisecond))
	return nil
}

// writeFull writes a full sync's operations, through netlink when it
// can, else through nft, and says which.
func (fp *familyProxier) writeFull(ctx context.Context, rec *netlink.Recording) (string, error) {
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
func (fp *familyProxier) write(ctx context.Context, rec *netlink.Recording, nft func() knftables.Interface) (string, error) {
	if fp.batch != nil {
		err := fp.batch.Write(ctx, rec)
		if !errors.Is(err, netlink.ErrNotEncodable) && !errors.Is(err, netlink.ErrNotSent) {
			if err != nil {
				return "", fmt.Errorf("%s %s netlink transaction (%d operations): %w", fp.b.ip, tableName, rec.NumOperations(), err)
			}
			return "netlink", nil
		}
		klog.InfoS("Sync goes through nft", "family", fp.b.ip, "operations", rec.NumOperations(), "reason", err)
	}
	client := nft()
	tx := client.NewTransaction()
	rec.Replay(tx)
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

func hairpinElem(a netip.Addr) *knftables.Element { return netlink.AddrPairElement(hairpinSet, a) }

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
