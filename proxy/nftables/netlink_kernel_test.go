//go:build linux

package nftables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/internal/netnstest"
	"portal.dev/portal/proxy/nftables/netlink"
	"portal.dev/portal/proxy/snapshot"
)

// strictBatch is the netlink writer failing the test instead of letting
// a sync fall back to nft, so a test cannot pass on nft's work.
type strictBatch struct {
	t *testing.T
	w *netlink.Writer
	// took is the time of the last Write.
	took time.Duration
	// wrote counts the batches written.
	wrote int
}

func (s *strictBatch) Write(ctx context.Context, rec *netlink.Recording) error {
	start := time.Now()
	err := s.w.Write(ctx, rec)
	s.took = time.Since(start)
	if errors.Is(err, netlink.ErrNotEncodable) {
		s.t.Errorf("sync fell back to nft: %v", err)
	}
	if err == nil {
		s.wrote++
	}
	return err
}

func (s *strictBatch) Wrote(rec *netlink.Recording) { s.w.Wrote(rec) }

// newKernelProxiers returns a proxier writing full syncs through netlink
// and one writing everything through nft, for the same table.
func newKernelProxiers(t *testing.T, cfg Config, ipv6 bool) (viaNetlink, viaNFT *Proxier, batches []*strictBatch) {
	t.Helper()
	nft4, err := knftables.New(knftables.IPv4Family, tableName)
	if err != nil {
		t.Fatal(err)
	}
	var nft6 knftables.Interface
	if ipv6 {
		if nft6, err = knftables.New(knftables.IPv6Family, tableName); err != nil {
			t.Fatal(err)
		}
	}
	viaNFT = NewWithInterfaces(cfg, nft4, nft6)
	viaNetlink = NewWithInterfaces(cfg, nft4, nft6)
	return viaNetlink, viaNFT, useNetlink(t, viaNetlink)
}

// useNetlink makes p write full syncs through netlink, as New does, and
// fail the test rather than fall back to nft.
func useNetlink(t *testing.T, p *Proxier) []*strictBatch {
	var batches []*strictBatch
	for _, fp := range p.set.Families {
		family := knftables.IPv4Family
		if fp.b.ip == "ip6" {
			family = knftables.IPv6Family
		}
		sb := &strictBatch{t: t, w: netlink.NewWriter(family, tableName)}
		fp.batch = sb
		batches = append(batches, sb)
	}
	return batches
}

// TestNetlinkScale measures a netlink full sync of 10,000 Services x 10
// endpoints against nft's, in a throwaway network namespace, and checks
// both list the same. Slow: only with PORTAL_NFT_SCALE=1 (as root).
func TestNetlinkScale(t *testing.T) {
	if os.Getenv("PORTAL_NFT_SCALE") == "" {
		t.Skip("skipped: set PORTAL_NFT_SCALE=1 to measure at 10,000 Services")
	}
	if !netnstest.Enter(t, "nft") {
		return
	}
	viaNetlink, viaNFT, batches := newKernelProxiers(t, withCIDR, false)
	w := bigWorld(10000, 10)

	start := time.Now()
	mustSync(t, viaNFT, fullRequest(w.snap))
	t.Logf("first full sync through nft: %v", time.Since(start))
	want := sh(t, "nft list table ip portal")
	if err := viaNFT.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	mustSync(t, viaNetlink, fullRequest(w.snap))
	t.Logf("first full sync through netlink: %v (netlink write %v)", time.Since(start), batches[0].took)
	got := sh(t, "nft list table ip portal")
	if got != want {
		t.Errorf("netlink and nft full syncs list differently:\n%s", listingDiff(want, got))
	}
	start = time.Now()
	mustSync(t, viaNetlink, fullRequest(w.snap))
	t.Logf("periodic full resync through netlink: %v (netlink write %v)", time.Since(start), batches[0].took)
	if got := sh(t, "nft list table ip portal"); got != want {
		t.Errorf("netlink resync lists differently:\n%s", listingDiff(want, got))
	}

	// Partial syncs of one Service among 10,000 (its endpoints go from
	// 10 to 2 and back, so its rules change too), through netlink, each
	// of which must take < 50 ms, and through nft for comparison.
	partials := func(p *Proxier, via string) {
		nn := types.NamespacedName{Namespace: "ns7", Name: "svc5007"}
		orig := w.snap.Endpoints[nn]
		alt := endpointsFor("http", v1.ProtocolTCP, ep("10.250.0.1:8080"), ep("10.250.0.2:8080"))
		var all, writes []time.Duration
		for i := range 20 {
			eps := alt
			if i%2 == 1 {
				eps = orig
			}
			snap := &snapshot.Snapshot{Services: w.snap.Services, Endpoints: cloneWith(w.snap.Endpoints, nn, eps), Node: w.snap.Node}
			start := time.Now()
			mustSync(t, p, partialRequest(snap, nn))
			all = append(all, time.Since(start))
			if via == "netlink" {
				writes = append(writes, batches[0].took)
			}
		}
		slices.Sort(all)
		t.Logf("partial syncs through %s: median %v, max %v (netlink writes: %v)", via, all[len(all)/2], all[len(all)-1], writes)
		if via == "netlink" && all[len(all)-1] > 50*time.Millisecond {
			t.Errorf("a partial sync through %s took %v, want < 50 ms", via, all[len(all)-1])
		}
	}
	partials(viaNetlink, "netlink")
	nftOnly, _, _ := newKernelProxiers(t, withCIDR, false)
	nftOnly.set.Families[0].batch = nil
	mustSync(t, nftOnly, fullRequest(w.snap))
	partials(nftOnly, "nft")

	// Where a first full sync's time goes.
	if err := viaNetlink.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh, _, _ := newKernelProxiers(t, withCIDR, false)
	fp := fresh.set.Families[0]
	start = time.Now()
	rec := &netlink.Recording{}
	fp.full(rec, w.snap, nil)
	built := time.Since(start)
	start = time.Now()
	nw := netlink.NewWriter(knftables.IPv4Family, tableName)
	size, err := nw.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	encoded := time.Since(start)
	start = time.Now()
	if err := nw.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	t.Logf("first full sync: building the objects %v, encoding %v (%d MiB), encoding again and the kernel %v", built, encoded, size>>20, time.Since(start))
}

// listingDiff returns the lines only in want ("- ") and only in got
// ("+ "), at most 40 of them, in linear time (listings are 100,000 lines).
func listingDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var b strings.Builder
	n := 0
	for _, l := range strings.Split(want+"\n"+got, "\n") {
		c := count[l]
		if c == 0 || n >= 40 {
			continue
		}
		if c > 0 {
			b.WriteString("- " + l + "\n")
		} else {
			b.WriteString("+ " + l + "\n")
		}
		count[l] = 0
		n++
	}
	return b.String()
}

// TestNetlinkKernel: syncs written through netlink list exactly as the
// same syncs written by nft (`nft list table`), for every kind of
// Service in both families and every configuration: a first full sync;
// a sequence of partial syncs (endpoints added and removed, Services
// added and removed, one losing all its endpoints and getting them back,
// affinity, NodePorts, source ranges, IPv6); a periodic resync on the
// existing table (affinity entries kept); a restart's full sync over a
// table left by an earlier run. It runs the same sequence through nft
// alone and through netlink, one after the other, in a throwaway network
// namespace; the netlink run fails if any sync falls back to nft.
func TestNetlinkKernel(t *testing.T) {
	if !netnstest.Enter(t, "nft") {
		return
	}
	nodePorts := testNode()
	nodePorts.NodePorts = snapshot.NodePortAddresses{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}}
	for _, tc := range []struct {
		name string
		cfg  Config
		node *snapshot.Node
	}{
		{"cluster CIDRs", withCIDR, nil},
		{"cluster CIDRs not on a byte boundary", Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/14"), netip.MustParsePrefix("fd00:244::/60")}}, nil},
		{"masquerade all", Config{MasqueradeAll: true}, nil},
		{"NodePort addresses", Config{}, nodePorts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			viaNetlink, viaNFT, batches := newKernelProxiers(t, tc.cfg, true)
			want := netlinkSteps(t, viaNFT, tc.node, func() *Proxier { _, p, _ := newKernelProxiers(t, tc.cfg, true); return p })
			got := netlinkSteps(t, viaNetlink, tc.node, func() *Proxier { p, _, _ := newKernelProxiers(t, tc.cfg, true); return p })
			if len(got) != len(want) {
				t.Fatalf("got %d steps, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].listing != want[i].listing {
					t.Errorf("%s: netlink lists differently from nft:\n%s", want[i].name, listingDiff(want[i].listing, got[i].listing))
				}
				if got[i].listing == got[max(i-1, 0)].listing && i > 0 && got[i].name != "periodic full resync" {
					t.Errorf("%s changed nothing in the table: the step tests nothing", got[i].name)
				}
			}
			if !strings.Contains(got[0].listing, "update @affinity-") || !strings.Contains(got[0].listing, "@firewall-allow") || !strings.Contains(got[0].listing, "numgen random mod 35 < 32 goto") {
				t.Errorf("the world lacks a rule shape:\n%s", got[0].listing)
			}
			for _, b := range batches {
				// A first full sync, the partial ones, a resync: the
				// restarted proxier has writers of its own.
				if want := len(got) - 1; b.wrote != want {
					t.Errorf("%d syncs of a family went through netlink, want %d", b.wrote, want)
				}
			}
		})
	}
}

// step is the listing of both tables after one step of netlinkSteps.
type step struct{ name, listing string }

// netlinkSteps runs the sequence TestNetlinkKernel compares on p and
// returns both tables' listings after each step; restarted makes the
// proxier of the last step. It leaves no table behind.
func netlinkSteps(t *testing.T, p *Proxier, node *snapshot.Node, restarted func() *Proxier) []step {
	t.Helper()
	w := kernelWorld()
	if node != nil {
		w.snap.Node = node
	}
	w.set(svc("default/big-affinity", "10.96.0.30,fd00:96::30", affinity(time.Hour)), endpointsFor("http", v1.ProtocolTCP, manyEndpoints(70)...))
	var out []step
	list := func(name string) {
		l := sh(t, "nft list table ip portal; nft list table ip6 portal")
		out = append(out, step{name, expires.ReplaceAllString(l, "")})
	}
	mustSync(t, p, fullRequest(w.snap))
	list("first full sync")

	for _, ps := range partialSteps(w) {
		mustSync(t, p, partialRequest(w.snap, ps.change()...))
		list("partial sync: " + ps.name)
	}

	// A client pinned by affinity; the resync must keep it.
	sh(t, "nft add element ip portal 'affinity-default/sticky/tcp/80/10.244.4.1_8080-t1200' '{ 10.0.0.99 }'")
	w.remove(types.NamespacedName{Namespace: "default", Name: "udp"})
	mustSync(t, p, fullRequest(w.snap))
	list("periodic full resync")
	if l := out[len(out)-1].listing; !strings.Contains(l, "10.0.0.99") {
		t.Errorf("the periodic resync lost an affinity entry:\n%s", excerpt(l, "affinity-default/sticky/tcp/80/10.244.4.1_8080-t1200"))
	}

	// A restart: a new proxier finds the table and syncs a world
	// without some Services, with a new one.
	w.remove(types.NamespacedName{Namespace: "default", Name: "lb"})
	w.remove(types.NamespacedName{Namespace: "default", Name: "big-affinity"})
	w.set(svc("default/after", "10.96.0.50", port("dns", v1.ProtocolUDP, 53, 30200)), endpointsFor("dns", v1.ProtocolUDP, ep("10.244.6.1:53")))
	p2 := restarted()
	mustSync(t, p2, fullRequest(w.snap))
	list("full sync of a restarted proxy")
	if err := p2.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

// partialStep changes w and returns the Services it changed.
type partialStep struct {
	name   string
	change func() []types.NamespacedName
}

// partialSteps is a sequence of partial syncs over kernelWorld, each
// changing the table.
func partialSteps(w *world) []partialStep {
	nn := func(name string) types.NamespacedName {
		return types.NamespacedName{Namespace: "default", Name: name}
	}
	web := func(eps ...*snapshot.Endpoint) *snapshot.ServiceEndpoints {
		if len(eps) == 0 {
			return nil
		}
		return endpointsFor("http", v1.ProtocolTCP, eps...)
	}
	webSvc := func(nodePort uint16) *snapshot.Service {
		return svc("default/web", "10.96.0.10,fd00:96::10", port("http", v1.ProtocolTCP, 80, nodePort))
	}
	return []partialStep{
		{"endpoints added and removed, a Service gone, one new with a load balancer, source ranges and affinity", func() []types.NamespacedName {
			w.remove(nn("none"))
			return []types.NamespacedName{
				nn("none"),
				w.set(svc("default/web2", "10.96.0.20"), web(ep("10.244.1.5:8080", "local"), ep("10.244.2.8:8080"), ep("10.244.2.9:8080"))),
				w.set(svc("default/spread", "10.96.0.21"), web(ep("10.0.0.1:8081"))),
				w.set(svc("default/new-lb", "10.96.0.40,fd00:96::40", port("http", v1.ProtocolTCP, 80, 30100), lbVIPs("192.0.2.40", "2001:db8::40"), sourceRanges("198.51.100.0/22", "2001:db8:2::/47"), affinity(5*time.Minute)),
					endpointsFor("http", v1.ProtocolTCP, ep("10.244.5.1:8080"), ep("[fd00:244::5]:8080"))),
			}
		}},
		{"a dual-stack NodePort Service loses all its endpoints", func() []types.NamespacedName {
			return []types.NamespacedName{w.set(webSvc(30080), nil)}
		}},
		{"and gets them back, with one more IPv6 endpoint", func() []types.NamespacedName {
			return []types.NamespacedName{w.set(webSvc(30080), web(ep("10.0.0.1:8080", "local"), ep("[fd00::1]:8080", "local"), ep("[fd00:244::7]:8080")))}
		}},
		{"a NodePort changes, an IPv6 endpoint leaves", func() []types.NamespacedName {
			return []types.NamespacedName{w.set(webSvc(30085), web(ep("10.0.0.1:8080", "local"), ep("[fd00::1]:8080", "local")))}
		}},
		{"affinity timeout changed, affinity turned off, a sticky Service's endpoints change", func() []types.NamespacedName {
			return []types.NamespacedName{
				w.set(svc("default/sticky", "10.96.0.16,fd00:96::16", affinity(20*time.Minute)), web(ep("10.244.4.1:8080"), ep("10.244.4.3:8080"), ep("[fd00:244::4]:8080"), ep("[fd00:244::6]:8080"))),
				w.set(svc("default/pinned", "10.96.0.22"), web(ep("10.0.0.1:8080"), ep("10.0.0.1:8081"))),
			}
		}},
		{"endpoint counts cross the slot ranges: 70 to 5, 40 to 45", func() []types.NamespacedName {
			many := make([]*snapshot.Endpoint, 45)
			for i := range many {
				many[i] = ep(fmt.Sprintf("10.244.8.%d:80", i+1))
			}
			return []types.NamespacedName{
				w.set(svc("default/big-affinity", "10.96.0.30,fd00:96::30", affinity(time.Hour)), web(manyEndpoints(5)...)),
				w.set(svc("default/many", "10.96.0.15"), web(many...)),
			}
		}},
		{"source ranges, load balancer VIPs and externalIPs change", func() []types.NamespacedName {
			return []types.NamespacedName{w.set(svc("default/lb", "10.96.0.14,fd00:96::14", port("http", v1.ProtocolTCP, 80, 30081), lbVIPs("192.0.2.12", "2001:db8::10"), sourceRanges("203.0.113.0/25", "2001:db8:1::/56", "198.18.0.0/15"), externalIPs("192.0.2.13", "2001:db8::13")),
				endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8080", "node=node2"), ep("[fd00:244::8]:8080")))}
		}},
		{"the new load balancer Service and a UDP Service removed, an SCTP endpoint becomes ready", func() []types.NamespacedName {
			w.remove(nn("new-lb"))
			w.remove(nn("udp"))
			return []types.NamespacedName{nn("new-lb"), nn("udp"),
				w.set(svc("default/sctp", "10.96.0.19", port("s", v1.ProtocolSCTP, 9000, 30091)), endpointsFor("s", v1.ProtocolSCTP, ep("10.244.3.1:9000"), ep("10.244.3.2:9000")))}
		}},
		{"an IPv6-only Service added with a NodePort and affinity", func() []types.NamespacedName {
			return []types.NamespacedName{w.set(svc("default/v6", "fd00:96::60", port("http", v1.ProtocolTCP, 80, 30160), affinity(time.Minute)), web(ep("[fd00:244::60]:8080"), ep("[fd00:244::61]:8080")))}
		}},
		{"the UDP Service back, the IPv6-only one gone", func() []types.NamespacedName {
			w.remove(nn("v6"))
			return []types.NamespacedName{nn("v6"), w.set(svc("default/udp", "10.96.0.12", port("dns", v1.ProtocolUDP, 53, 0)), endpointsFor("dns", v1.ProtocolUDP, ep("10.0.0.1:5353", "local")))}
		}},
	}
}
