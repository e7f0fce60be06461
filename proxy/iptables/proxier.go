// Package iptables is the iptables proxy mode: kube-proxy-style chains in
// the nat and filter tables of iptables and ip6tables (nft backend),
// written with iptables-restore --noflush. PORTAL-SERVICES dispatches a
// packet by destination to a per-Service-port chain (PORTAL-SVC-, or
// PORTAL-SVL- for Local traffic policies, PORTAL-EXT- for external
// traffic, PORTAL-FW- for loadBalancerSourceRanges), which picks an
// endpoint chain (PORTAL-SEP-) with statistic probabilities, or with the
// recent module for ClientIP affinity. The filter table rejects traffic to
// Services without endpoints and drops what policies refuse.
//
// It owns the PORTAL-* chains and the jumps to them from the built-in
// chains, and nothing else: it must not touch other chains, conntrack (the
// proxy core does that) or nftables tables. A full sync rewrites every
// chain it owns and deletes stale ones; a partial sync rewrites only the
// per-Service chains whose rules changed, and the shared dispatch chains
// only if their rules changed (an endpoint change leaves them alone).
// The command runner is injected, so tests check the generated input of
// iptables-restore without root.
package iptables

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"portal.dev/portal/proxy/family"
	"portal.dev/portal/proxy/leftovers"
	"portal.dev/portal/proxy/snapshot"
)

// Config configures the iptables mode.
type Config struct {
	// ClusterCIDRs are the pod CIDRs, at most one per family. Traffic from
	// outside them to a cluster IP is masqueraded; empty means unknown.
	ClusterCIDRs []netip.Prefix
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// BeforeFirstSync, if set, runs once before the first sync; the proxy
	// uses it to remove the rules other Portal modes left.
	BeforeFirstSync func(ctx context.Context) error
	// Run runs iptables commands (nil: os/exec).
	Run leftovers.Runner
}

// Tool is one family's pair of iptables-save and iptables-restore binaries.
type Tool struct {
	Family  snapshot.Family
	Save    string
	Restore string
}

// DefaultTools are the nft-backend binaries of the Debian iptables package.
var DefaultTools = []Tool{
	{Family: "IPv4", Save: "iptables-nft-save", Restore: "iptables-nft-restore"},
	{Family: "IPv6", Save: "ip6tables-nft-save", Restore: "ip6tables-nft-restore"},
}

// Proxier programs the PORTAL-* chains. It is not safe for concurrent
// use; the proxy core calls it from one goroutine.
type Proxier struct {
	set family.Set[*familyProxier]
}

// New returns a Proxier for the families whose tools are installed; IPv4
// is required.
func New(cfg Config) (*Proxier, error) {
	var tools []Tool
	for _, t := range DefaultTools {
		if _, err := exec.LookPath(t.Restore); err != nil {
			if t.Family == "IPv4" {
				return nil, fmt.Errorf("iptables mode needs %s (Debian package iptables): %w", t.Restore, err)
			}
			klog.InfoS("IPv6 iptables unavailable; proxying IPv4 only", "err", err)
			continue
		}
		tools = append(tools, t)
	}
	return NewWithTools(cfg, tools), nil
}

// NewWithTools returns a Proxier using the given tools through cfg.Run.
func NewWithTools(cfg Config, tools []Tool) *Proxier {
	if cfg.Run == nil {
		cfg.Run = leftovers.ExecRunner
	}
	p := &Proxier{set: family.Set[*familyProxier]{BeforeFirstSync: cfg.BeforeFirstSync}}
	for _, t := range tools {
		cidr := family.ClusterCIDR(cfg.ClusterCIDRs, t.Family)
		p.set.Families = append(p.set.Families, &familyProxier{tool: t, run: cfg.Run, b: newBuilder(t.Family, cidr, cfg.MasqueradeAll)})
	}
	return p
}

// Sync programs req's snapshot: everything when req.Full or on the first
// call, else the changed chains. Each family is one iptables-restore,
// which the kernel applies atomically, unless it writes more than
// maxChainsPerRestore per-Service chains: see there.
func (p *Proxier) Sync(ctx context.Context, req snapshot.Request) error {
	return p.set.Sync(ctx, req)
}

// Cleanup removes every PORTAL-* chain and the jumps to them. The Proxier
// forgets what it wrote, so a later Sync is a full one.
func (p *Proxier) Cleanup(ctx context.Context) error { return p.set.Cleanup(ctx) }

// Cleanup removes the family's PORTAL-* chains and the jumps to them, and
// forgets what it wrote.
func (fp *familyProxier) Cleanup(ctx context.Context) error {
	var errs []error
	for _, table := range []string{"nat", "filter"} {
		save, err := fp.run(ctx, fp.tool.Save, []string{"-t", table}, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, script := range leftovers.RestoreScripts(table, save) {
			if _, err := fp.run(ctx, fp.tool.Restore, []string{"--noflush"}, script); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	fp.written = nil
	return errors.Join(errs...)
}

// familyProxier programs one family and remembers what its last successful
// restore wrote, which partial syncs diff against.
type familyProxier struct {
	tool Tool
	run  leftovers.Runner
	b    *builder

	// written is nil until the first successful sync.
	written map[types.NamespacedName]*writtenService
	// shared holds the hash of each shared chain ("table/name") as the
	// last successful sync wrote it.
	shared map[string]uint64
}

// writtenService is what one Service has in the tables: its rules in the
// shared chains, and the hash of each of its own chains. The rules of its
// own chains are not kept: in a big cluster they are most of the memory,
// and a partial sync only needs to know whether they changed.
type writtenService struct {
	rules  *serviceRules // natChains nil
	chains map[string]uint64
}

// jump is a rule in a built-in chain that leads to ours.
type jump struct {
	table, chain, rule string
}

var jumps = []jump{
	{"nat", "PREROUTING", "-j " + servicesChain},
	{"nat", "OUTPUT", "-j " + servicesChain},
	{"nat", "POSTROUTING", "-j " + postroutingCh},
	{"filter", "INPUT", "-m conntrack --ctstate NEW -j " + servicesChain},
	{"filter", "FORWARD", "-m conntrack --ctstate NEW -j " + servicesChain},
	{"filter", "OUTPUT", "-m conntrack --ctstate NEW -j " + servicesChain},
	{"filter", "INPUT", "-j " + firewallChain},
	{"filter", "FORWARD", "-j " + firewallChain},
	{"filter", "OUTPUT", "-j " + firewallChain},
}

// maxChainsPerRestore bounds the per-Service chains one iptables-restore
// creates or rewrites (leftovers removes chains in inputs of the same
// bound). iptables-nft-restore --noflush (1.8.9) spends time
// quadratic in the chains of one input, so several small inputs cost
// far less than one big one, and a full sync writes about eleven chains
// per Service. Each chunk holds whole Services (their
// chains only jump to each other and to the static PORTAL-MARK-* chains,
// which the first chunk writes), and the last restore switches the
// dispatch chains over and deletes stale chains, so the kernel is
// consistent for every Service between any two restores. A restore that
// fails part way leaves chains nothing jumps to yet, harmless to traffic;
// the full sync that follows any failed sync deletes every chain that no
// Service owns.
const maxChainsPerRestore = leftovers.MaxChainsPerRestore

// Sync programs req for the family: a full or partial restore, in
// chunks of at most maxChainsPerRestore per-Service chains.
func (fp *familyProxier) Sync(ctx context.Context, req snapshot.Request) error {
	var plan *plan
	if req.Full || fp.written == nil {
		existing := map[string]*tableState{}
		for _, table := range []string{"nat", "filter"} {
			save, err := fp.run(ctx, fp.tool.Save, []string{"-t", table}, "")
			if err != nil {
				return fmt.Errorf("%s: %w", fp.tool.Save, err)
			}
			existing[table] = parseSave(table, save)
		}
		plan = fp.planFull(req.Snapshot, existing)
	} else {
		plan = fp.planPartial(req.Snapshot, req.Changed)
	}
	for i, script := range plan.scripts {
		if _, err := fp.run(ctx, fp.tool.Restore, []string{"--noflush"}, script); err != nil {
			return fmt.Errorf("%s (input %d of %d, %d chains in all): %w", fp.tool.Restore, i+1, len(plan.scripts), plan.chainsWritten, err)
		}
	}
	fp.written, fp.shared = plan.written, plan.shared
	return nil
}

// plan is one sync: the inputs of iptables-restore, in order, and what
// the Proxier will have written once they succeed.
type plan struct {
	scripts       []string
	chainsWritten int
	written       map[types.NamespacedName]*writtenService
	shared        map[string]uint64
}

// tableState is what iptables-save says about one table.
type tableState struct {
	chains map[string]bool // PORTAL-* chains
	rules  map[string]bool // "-A CHAIN ..." lines of the built-in chains
}

func parseSave(table, save string) *tableState {
	st := &tableState{chains: map[string]bool{}, rules: map[string]bool{}}
	sc := bufio.NewScanner(strings.NewReader(save))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			in = line[1:] == table
		case !in:
		case strings.HasPrefix(line, ":"+leftovers.ChainPrefix):
			name, _, _ := strings.Cut(line[1:], " ")
			st.chains[name] = true
		case strings.HasPrefix(line, "-A ") && !strings.HasPrefix(line, "-A "+leftovers.ChainPrefix):
			st.rules[line] = true
		}
	}
	return st
}

func (fp *familyProxier) planFull(snap *snapshot.Snapshot, existing map[string]*tableState) *plan {
	written := make(map[types.NamespacedName]*writtenService, len(snap.Services))
	own := make(map[types.NamespacedName][]chain, len(snap.Services))
	for nn, svc := range snap.Services {
		r := fp.b.service(svc, snap.Endpoints[nn], snap.Node)
		if !r.empty() {
			written[nn] = newWritten(r)
			own[nn] = r.natChains
		}
	}
	owned := map[string]bool{}
	for _, ws := range written {
		for c := range ws.chains {
			owned[c] = true
		}
	}
	stale := map[string][]string{}
	for table, st := range existing {
		for c := range st.chains {
			if table == "nat" && owned[c] {
				continue
			}
			if isStatic(table, c) {
				continue
			}
			stale[table] = append(stale[table], c)
		}
	}
	var groups [][]chain
	for _, nn := range sortedNames(written) {
		groups = append(groups, own[nn])
	}
	var missing []jump
	for _, j := range jumps {
		if !existing[j.table].rules["-A "+j.chain+" "+j.rule] {
			missing = append(missing, j)
		}
	}
	return fp.plan(snap.Node, written, groups, stale, missing, nil)
}

func (fp *familyProxier) planPartial(snap *snapshot.Snapshot, changed map[types.NamespacedName]struct{}) *plan {
	written := make(map[types.NamespacedName]*writtenService, len(fp.written)+len(changed))
	for nn, ws := range fp.written {
		written[nn] = ws
	}
	var groups [][]chain
	stale := map[string][]string{}
	for _, nn := range sortedNames(changed) {
		old := fp.written[nn]
		r := fp.b.service(snap.Services[nn], snap.Endpoints[nn], snap.Node)
		ws := newWritten(r)
		if r.empty() {
			delete(written, nn)
		} else {
			written[nn] = ws
		}
		var group []chain
		for _, c := range r.natChains {
			if old != nil && old.chains[c.name] == ws.chains[c.name] {
				continue
			}
			group = append(group, c)
		}
		if len(group) > 0 {
			groups = append(groups, group)
		}
		if old != nil {
			for _, name := range slices.Sorted(maps.Keys(old.chains)) {
				if _, keep := ws.chains[name]; !keep {
					stale["nat"] = append(stale["nat"], name)
				}
			}
		}
	}
	return fp.plan(snap.Node, written, groups, stale, nil, fp.shared)
}

// plan writes the restore inputs: the per-Service chains (groups, one per
// Service), the shared chains whose hash differs from unchanged (nil:
// all), the missing jumps from built-in chains, and the deletion of the
// stale chains. Past maxChainsPerRestore the groups go in chunks ahead of
// the rest (see maxChainsPerRestore). A partial sync with nothing to
// write has no input.
func (fp *familyProxier) plan(node *snapshot.Node, written map[types.NamespacedName]*writtenService, groups [][]chain, stale map[string][]string, missing []jump, unchanged map[string]uint64) *plan {
	shared := fp.sharedChains(node, written)
	hashes := make(map[string]uint64, len(shared))
	for key, c := range shared {
		hashes[key] = hashRules(c.rules)
	}
	total := 0
	for _, g := range groups {
		total += len(g)
	}
	pl := &plan{chainsWritten: total, written: written, shared: hashes}
	var natChains []chain
	if total > maxChainsPerRestore {
		var chunk []chain
		first := true
		flush := func() {
			if first {
				// The chains every per-Service chain may jump to.
				chunk = append([]chain{shared["nat/"+markMasqChain], shared["nat/"+markDropChain]}, chunk...)
				first = false
			}
			var w scriptWriter
			w.line("*nat")
			writeChains(&w, chunk)
			w.line("COMMIT")
			pl.scripts = append(pl.scripts, w.String())
			chunk = nil
		}
		for _, g := range groups {
			if len(chunk) > 0 && len(chunk)+len(g) > maxChainsPerRestore {
				flush()
			}
			chunk = append(chunk, g...)
		}
		if len(chunk) > 0 {
			flush()
		}
	} else {
		for _, g := range groups {
			natChains = append(natChains, g...)
		}
	}
	var w scriptWriter
	if fp.writeTables(&w, shared, unchanged, hashes, natChains, stale, missing) || unchanged == nil {
		pl.scripts = append(pl.scripts, w.String())
	}
	return pl
}

// sharedChains returns the chains that are not any one Service's, keyed
// "table/name": the dispatch chains, built from every Service's rules, and
// the static ones.
func (fp *familyProxier) sharedChains(node *snapshot.Node, written map[types.NamespacedName]*writtenService) map[string]chain {
	natSvc, natNP, filterSvc, filterNP := []string{}, []string{}, []string{}, []string{}
	for _, nn := range sortedNames(written) {
		r := written[nn].rules
		natSvc = append(natSvc, r.natServices...)
		natNP = append(natNP, r.natNodePorts...)
		filterSvc = append(filterSvc, r.filterServices...)
		filterNP = append(filterNP, r.filterNodePorts...)
	}
	for _, m := range fp.nodePortMatches(node) {
		natSvc = append(natSvc, m+" -j "+nodePortsChain)
		filterSvc = append(filterSvc, m+" -j "+nodePortsChain)
	}
	return map[string]chain{
		"nat/" + servicesChain:  {servicesChain, natSvc},
		"nat/" + nodePortsChain: {nodePortsChain, natNP},
		"nat/" + postroutingCh: {postroutingCh, []string{
			"-m mark ! --mark " + masqueradeMark + "/" + masqueradeMark + " -j RETURN",
			// Cleared so a packet that passes twice (tunnels) is
			// not masqueraded twice.
			"-j MARK --xor-mark " + masqueradeMark,
			"-j MASQUERADE --random-fully",
		}},
		"nat/" + markMasqChain:     {markMasqChain, []string{"-j MARK --or-mark " + masqueradeMark}},
		"nat/" + markDropChain:     {markDropChain, []string{"-j MARK --or-mark " + dropMark}},
		"filter/" + servicesChain:  {servicesChain, filterSvc},
		"filter/" + nodePortsChain: {nodePortsChain, filterNP},
		"filter/" + firewallChain:  {firewallChain, []string{"-m mark --mark " + dropMark + "/" + dropMark + " -j DROP"}},
	}
}

// sharedOrder is the order the shared chains are written in.
var sharedOrder = []string{servicesChain, nodePortsChain, postroutingCh, markMasqChain, markDropChain, firewallChain}

// writeTables writes one restore input: the shared chains whose hash in
// hashes differs from unchanged (nil: all of them), the given per-Service
// chains, the missing jumps from built-in chains, then the stale chains'
// deletion (flushed first, as they may jump to each other). It reports
// whether the input changes anything.
func (fp *familyProxier) writeTables(w *scriptWriter, shared map[string]chain, unchanged, hashes map[string]uint64, natChains []chain, stale map[string][]string, missing []jump) bool {
	changes := false
	for _, table := range []string{"nat", "filter"} {
		var chains []chain
		for _, name := range sharedOrder {
			key := table + "/" + name
			c, ok := shared[key]
			if !ok {
				continue
			}
			if h, ok := unchanged[key]; ok && h == hashes[key] {
				continue
			}
			chains = append(chains, c)
		}
		if table == "nat" {
			chains = append(chains, natChains...)
		}
		staleHere := stale[table]
		sort.Strings(staleHere)
		var jumpsHere []jump
		for _, j := range missing {
			if j.table == table {
				jumpsHere = append(jumpsHere, j)
			}
		}
		if len(chains) == 0 && len(staleHere) == 0 && len(jumpsHere) == 0 {
			continue
		}
		changes = true
		w.line("*" + table)
		writeChains(w, append(chains, staleChains(staleHere)...))
		for _, j := range jumpsHere {
			w.line("-I " + j.chain + " 1 " + j.rule)
		}
		for _, c := range staleHere {
			w.line("-X " + c)
		}
		w.line("COMMIT")
	}
	return changes
}

// writeChains declares chains (creating or flushing them), then adds
// their rules, so a rule may jump to any chain of the same input.
func writeChains(w *scriptWriter, chains []chain) {
	for _, c := range chains {
		w.line(":" + c.name + " - [0:0]")
	}
	for _, c := range chains {
		for _, r := range c.rules {
			w.line("-A " + c.name + " " + r)
		}
	}
}

func staleChains(names []string) []chain {
	out := make([]chain, len(names))
	for i, n := range names {
		out[i] = chain{name: n}
	}
	return out
}

// nodePortMatches returns the matches of the packets that may be for a
// NodePort: any local address but loopback (NodePorts on 127.0.0.1 would
// need route_localnet, which kube-proxy's nftables mode refuses too), or
// the --nodeport-addresses.
func (fp *familyProxier) nodePortMatches(node *snapshot.Node) []string {
	if node == nil || node.NodePorts.All {
		return []string{"-m addrtype --dst-type LOCAL ! -d " + fp.b.loopback}
	}
	var out []string
	for _, a := range node.NodePorts.Of(fp.b.family) {
		out = append(out, "-d "+fp.b.host(a))
	}
	return out
}

func isStatic(table, name string) bool {
	switch name {
	case servicesChain, nodePortsChain:
		return true
	case postroutingCh, markMasqChain, markDropChain:
		return table == "nat"
	case firewallChain:
		return table == "filter"
	}
	return false
}

func newWritten(r *serviceRules) *writtenService {
	shared := *r
	shared.natChains = nil
	ws := &writtenService{rules: &shared, chains: make(map[string]uint64, len(r.natChains))}
	for _, c := range r.natChains {
		ws.chains[c.name] = hashRules(c.rules)
	}
	return ws
}

func hashRules(rules []string) uint64 {
	h := fnv.New64a()
	for _, r := range rules {
		h.Write([]byte(r))
		h.Write([]byte{'\n'})
	}
	return h.Sum64()
}

type scriptWriter struct{ strings.Builder }

func (w *scriptWriter) line(s string) {
	w.WriteString(s)
	w.WriteByte('\n')
}

func sortedNames[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for nn := range m {
		out = append(out, nn)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
