//go:build linux

// Package podnet gives pods their network on a node: the bridge portal0
// holding the first address of each node pod CIDR, one veth per pod from
// the bridge into the pod's network namespace (eth0, an address from the
// pod CIDR, default route via the bridge), routes to the other nodes' pod
// CIDRs through their node IPs, and masquerade for pod traffic leaving the
// cluster in an nftables table of its own, `inet portal-agent`.
//
// It touches only what it names: the bridge, veths it created (named
// vp<hash of the pod>), routes it installed (protocol 0x70), its own
// nftables table, the node's forwarding sysctls, and its address files
// under the state directory. It uses the `ip` and `nft` commands.
package podnet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"portal.dev/portal/agent/container"
)

// DefaultBridge is the node bridge's name.
const DefaultBridge = "portal0"

// routeProto marks the routes podnet installs, so it can tell them apart.
const routeProto = "0x70"

// TableName is podnet's nftables table (family inet).
const TableName = "portal-agent"

// Config is the node's pod network.
type Config struct {
	Bridge   string // DefaultBridge when empty
	PodCIDRs []netip.Prefix
	// ClusterCIDRs are the pod ranges of the whole cluster: traffic to them
	// is not masqueraded. Empty: every node's pod CIDR, as SyncPeers
	// learns them.
	ClusterCIDRs []netip.Prefix
	// StateDir holds the address allocations.
	StateDir string
}

// Peer is another node: its pod CIDRs are reached through its addresses.
type Peer struct {
	Name     string
	IPs      []netip.Addr
	PodCIDRs []netip.Prefix
}

// Network is one node's pod network.
type Network struct {
	cfg  Config
	ipam IPAM

	mu    sync.Mutex
	peers []Peer
	table string // last nftables ruleset written
}

// New returns the node's network; Setup builds it.
func New(cfg Config) *Network {
	if cfg.Bridge == "" {
		cfg.Bridge = DefaultBridge
	}
	return &Network{cfg: cfg, ipam: IPAM{Dir: cfg.StateDir}}
}

// Setup creates the bridge with its gateway addresses, turns on forwarding
// and writes the masquerade table. It is idempotent.
func (n *Network) Setup(ctx context.Context) error {
	br := n.cfg.Bridge
	if _, err := runCmd(ctx, nil, "ip", "link", "show", "dev", br); err != nil {
		if _, err := runCmd(ctx, nil, "ip", "link", "add", br, "type", "bridge"); err != nil {
			return fmt.Errorf("create bridge %s: %w", br, err)
		}
	}
	v6 := false
	for _, c := range n.cfg.PodCIDRs {
		args := []string{"addr", "replace", netip.PrefixFrom(Gateway(c), c.Bits()).String(), "dev", br}
		if c.Addr().Is6() {
			v6 = true
			args = []string{"-6", "addr", "replace", netip.PrefixFrom(Gateway(c), c.Bits()).String(), "dev", br, "nodad"}
		}
		if _, err := runCmd(ctx, nil, "ip", args...); err != nil {
			return fmt.Errorf("address bridge %s: %w", br, err)
		}
	}
	if _, err := runCmd(ctx, nil, "ip", "link", "set", br, "up"); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turn on IPv4 forwarding: %w", err)
	}
	if v6 {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644); err != nil {
			return fmt.Errorf("turn on IPv6 forwarding: %w", err)
		}
	}
	if err := bridgeNetfilter(ctx, v6); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.writeTableLocked(ctx)
}

// bridgeNetfilter makes traffic bridged between pods go through netfilter,
// as kubelet's kubenet did. A pod that reaches a Service whose backend is
// another pod of this node gets the reply straight over the bridge; unless
// netfilter sees bridged packets, the proxy's DNAT is never undone on it
// and the client drops the reply. The module is loaded when the kernel has
// it as a module; the switch is per network namespace.
func bridgeNetfilter(ctx context.Context, v6 bool) error {
	const dir = "/proc/sys/net/bridge/"
	if _, err := os.Stat(dir + "bridge-nf-call-iptables"); err != nil {
		if _, err := runCmd(ctx, nil, "modprobe", "br_netfilter"); err != nil {
			return fmt.Errorf("load br_netfilter, which Services between pods of one node need: %w", err)
		}
	}
	names := []string{"bridge-nf-call-iptables"}
	if v6 {
		names = append(names, "bridge-nf-call-ip6tables")
	}
	for _, name := range names {
		if cur, err := os.ReadFile(dir + name); err == nil && strings.TrimSpace(string(cur)) == "1" {
			continue // already on: a read-only /proc/sys is fine then
		}
		if err := os.WriteFile(dir+name, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("turn on net.bridge.%s, which Services between pods of one node need: %w", name, err)
		}
	}
	return nil
}

// SyncPeers makes the routes to the other nodes' pod CIDRs match peers
// (removing routes of nodes that are gone) and updates the masquerade
// exceptions.
func (n *Network) SyncPeers(ctx context.Context, peers []Peer) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.peers = peers
	want := map[string]bool{}
	var errs []error
	for _, p := range peers {
		for _, c := range p.PodCIDRs {
			if slices.Contains(n.cfg.PodCIDRs, c) {
				continue
			}
			for _, ip := range p.IPs {
				if ip.Is4() != c.Addr().Is4() {
					continue
				}
				fam := "-4"
				if c.Addr().Is6() {
					fam = "-6"
				}
				want[c.String()] = true
				if _, err := runCmd(ctx, nil, "ip", fam, "route", "replace", c.String(), "via", ip.String(), "proto", routeProto); err != nil {
					errs = append(errs, fmt.Errorf("route %s via %s (node %s): %w", c, ip, p.Name, err))
				}
				break
			}
		}
	}
	for _, fam := range []string{"-4", "-6"} {
		out, err := runCmd(ctx, nil, "ip", fam, "-o", "route", "show", "proto", routeProto)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && !want[f[0]] {
				runCmd(ctx, nil, "ip", fam, "route", "del", f[0], "proto", routeProto)
			}
		}
	}
	if err := n.writeTableLocked(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("sync routes: %v", errs)
	}
	return nil
}

// clusterCIDRsLocked are the destinations not masqueraded.
func (n *Network) clusterCIDRsLocked() []netip.Prefix {
	out := slices.Clone(n.cfg.PodCIDRs)
	if len(n.cfg.ClusterCIDRs) > 0 {
		return append(out, n.cfg.ClusterCIDRs...)
	}
	for _, p := range n.peers {
		out = append(out, p.PodCIDRs...)
	}
	return out
}

// Ruleset returns the masquerade table for the node's pod CIDRs and the
// cluster's: pod traffic to anything outside the cluster's pod ranges
// leaves with the node's address.
func Ruleset(podCIDRs, cluster []netip.Prefix) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", TableName)
	for _, fam := range []struct {
		set, typ string
		v4       bool
	}{{"cluster4", "ipv4_addr", true}, {"cluster6", "ipv6_addr", false}} {
		var elems []string
		for _, c := range cluster {
			if c.Addr().Is4() == fam.v4 && !slices.Contains(elems, c.Masked().String()) {
				elems = append(elems, c.Masked().String())
			}
		}
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype %s\n\t\tflags interval\n\t\tauto-merge\n", fam.set, fam.typ)
		if len(elems) > 0 {
			fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(elems, ", "))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
	for _, c := range podCIDRs {
		if c.Addr().Is4() {
			fmt.Fprintf(&b, "\t\tip saddr %s ip daddr != @cluster4 masquerade\n", c.Masked())
		} else {
			fmt.Fprintf(&b, "\t\tip6 saddr %s ip6 daddr != @cluster6 masquerade\n", c.Masked())
		}
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

func (n *Network) writeTableLocked(ctx context.Context) error {
	table := Ruleset(n.cfg.PodCIDRs, n.clusterCIDRsLocked())
	if table == n.table {
		return nil
	}
	// Create-then-delete makes the delete safe when the table is absent;
	// the whole file is one transaction.
	script := fmt.Sprintf("add table inet %s\ndelete table inet %s\n%s", TableName, TableName, table)
	if _, err := runCmd(ctx, []byte(script), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("write nftables table %s: %w", TableName, err)
	}
	n.table = table
	return nil
}

// VethName is the node-side veth of pod id.
func VethName(id string) string {
	h := sha256.Sum256([]byte(id))
	return "vp" + hex.EncodeToString(h[:])[:11]
}

// Attach gives pod id (its network namespace held by process pid) an
// address from each pod CIDR and joins it to the bridge. It is idempotent
// for the same id.
func (n *Network) Attach(ctx context.Context, id string, pid int) ([]netip.Addr, error) {
	n.mu.Lock()
	var addrs []netip.Addr
	for _, c := range n.cfg.PodCIDRs {
		a, err := n.ipam.Allocate(c, id)
		if err != nil {
			n.mu.Unlock()
			n.release(id)
			return nil, err
		}
		addrs = append(addrs, a)
	}
	n.mu.Unlock()
	veth := VethName(id)
	runCmd(ctx, nil, "ip", "link", "del", veth) // a leftover of an attempt that failed half-way
	if _, err := runCmd(ctx, nil, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(pid)); err != nil {
		n.release(id)
		return nil, fmt.Errorf("create veth %s: %w", veth, err)
	}
	if _, err := runCmd(ctx, nil, "ip", "link", "set", veth, "master", n.cfg.Bridge, "up"); err != nil {
		n.Detach(ctx, id)
		return nil, fmt.Errorf("attach veth %s to %s: %w", veth, n.cfg.Bridge, err)
	}
	var batch strings.Builder
	batch.WriteString("link set lo up\n")
	for i, c := range n.cfg.PodCIDRs {
		if c.Addr().Is6() {
			fmt.Fprintf(&batch, "-6 addr add %s dev eth0 nodad\n", netip.PrefixFrom(addrs[i], c.Bits()))
		} else {
			fmt.Fprintf(&batch, "addr add %s dev eth0\n", netip.PrefixFrom(addrs[i], c.Bits()))
		}
	}
	batch.WriteString("link set eth0 up\n")
	for _, c := range n.cfg.PodCIDRs {
		if c.Addr().Is6() {
			fmt.Fprintf(&batch, "-6 route add default via %s dev eth0\n", Gateway(c))
		} else {
			fmt.Fprintf(&batch, "route add default via %s dev eth0\n", Gateway(c))
		}
	}
	code, out, err := container.Run(ctx, container.Spec{Path: ipPath(), Args: []string{"ip", "-batch", "-"},
		Namespaces: container.Namespaces{Net: fmt.Sprintf("/proc/%d/ns/net", pid)}}, []byte(batch.String()))
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, bytes.TrimSpace(out))
	}
	if err != nil {
		n.Detach(ctx, id)
		return nil, fmt.Errorf("configure eth0 of pod %s: %w", id, err)
	}
	return addrs, nil
}

// Addresses returns the addresses pod id holds, from the allocation files.
func (n *Network) Addresses(id string) []netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []netip.Addr
	for _, c := range n.cfg.PodCIDRs {
		owners, _ := n.ipam.Owners(c)
		if a, ok := owners[id]; ok {
			out = append(out, a)
		}
	}
	return out
}

// Owners returns every pod ID holding an address.
func (n *Network) Owners() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ids []string
	for _, c := range n.cfg.PodCIDRs {
		owners, _ := n.ipam.Owners(c)
		for id := range owners {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// Detach removes pod id's veth (if its namespace still exists) and frees
// its addresses.
func (n *Network) Detach(ctx context.Context, id string) error {
	runCmd(ctx, nil, "ip", "link", "del", VethName(id))
	return n.release(id)
}

func (n *Network) release(id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, c := range n.cfg.PodCIDRs {
		if err := n.ipam.Release(c, id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("release addresses of %s: %v", id, errs)
	}
	return nil
}

func ipPath() string {
	if p, err := exec.LookPath("ip"); err == nil {
		return p
	}
	return "/usr/sbin/ip"
}

func runCmd(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}
