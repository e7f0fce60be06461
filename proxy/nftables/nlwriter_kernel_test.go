package nftables

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/internal/netnstest"
	"portal.dev/portal/proxy/snapshot"
)

// strictBatch is the netlink writer failing the test instead of letting
// a full sync fall back to nft, so a test cannot pass on nft's work.
type strictBatch struct {
	t *testing.T
	w *netlinkWriter
	// took is the time of the last Write.
	took time.Duration
}

func (s *strictBatch) Write(ctx context.Context, rec *recording) error {
	start := time.Now()
	err := s.w.Write(ctx, rec)
	s.took = time.Since(start)
	if errors.Is(err, errNotEncodable) {
		s.t.Errorf("full sync fell back to nft: %v", err)
	}
	return err
}

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
	for _, fp := range p.families {
		family := knftables.IPv4Family
		if fp.b.ip == "ip6" {
			family = knftables.IPv6Family
		}
		sb := &strictBatch{t: t, w: newNetlinkWriter(family, tableName)}
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

	// Where a first full sync's time goes.
	if err := viaNetlink.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh, _, _ := newKernelProxiers(t, withCIDR, false)
	fp := fresh.families[0]
	start = time.Now()
	rec := &recording{}
	fp.full(rec, w.snap, nil)
	built := time.Since(start)
	start = time.Now()
	batch, err := newNetlinkWriter(knftables.IPv4Family, tableName).encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	encoded := time.Since(start)
	start = time.Now()
	if err := batch.send(); err != nil {
		t.Fatal(err)
	}
	t.Logf("first full sync: building the objects %v, encoding %v (%d MiB), kernel %v", built, encoded, len(batch.buf)>>20, time.Since(start))
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

// TestNetlinkKernel: a full sync written through netlink lists exactly
// as the same sync written by nft (`nft list table`), for every kind of
// Service in both families and every configuration; partial syncs after
// it, a periodic resync on the existing table (affinity entries kept)
// and a restart's full sync over a table left by an earlier run list the
// same too. It runs the same sequence through nft alone and through
// netlink, one after the other, in a throwaway network namespace.
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
			for i, step := range []string{"first full sync", "partial sync", "periodic full resync", "full sync of a restarted proxy"} {
				if got[i] != want[i] {
					t.Errorf("%s: netlink lists differently from nft:\n%s", step, listingDiff(want[i], got[i]))
				}
			}
			if !strings.Contains(got[0], "update @affinity-") || !strings.Contains(got[0], "@firewall-allow") || !strings.Contains(got[0], "numgen random mod 35 < 32 goto") {
				t.Errorf("the world lacks a rule shape:\n%s", got[0])
			}
			for _, b := range batches {
				if b.took == 0 {
					t.Error("a family's full syncs did not go through netlink")
				}
			}
		})
	}
}

// netlinkSteps runs the sequence TestNetlinkKernel compares on p and
// returns both tables' listings after each step; restarted makes the
// proxier of the last step. It leaves no table behind.
func netlinkSteps(t *testing.T, p *Proxier, node *snapshot.Node, restarted func() *Proxier) []string {
	t.Helper()
	w := kernelWorld()
	if node != nil {
		w.snap.Node = node
	}
	w.set(svc("default/big-affinity", "10.96.0.30,fd00:96::30", affinity(time.Hour)), endpointsFor("http", v1.ProtocolTCP, manyEndpoints(70)...))
	var out []string
	list := func() {
		l := sh(t, "nft list table ip portal; nft list table ip6 portal")
		out = append(out, expires.ReplaceAllString(l, ""))
	}
	mustSync(t, p, fullRequest(w.snap))
	list()

	// Endpoints added and removed, a Service gone, one new with a
	// load balancer, source ranges and affinity.
	changed := []types.NamespacedName{
		w.set(svc("default/web2", "10.96.0.20"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.5:8080", "local"), ep("10.244.2.8:8080"), ep("10.244.2.9:8080"))),
		w.set(svc("default/spread", "10.96.0.21"), endpointsFor("http", v1.ProtocolTCP, ep("10.0.0.1:8081"))),
		w.set(svc("default/new-lb", "10.96.0.40,fd00:96::40", port("http", v1.ProtocolTCP, 80, 30100), lbVIPs("192.0.2.40", "2001:db8::40"), sourceRanges("198.51.100.0/22", "2001:db8:2::/47"), affinity(5*time.Minute)),
			endpointsFor("http", v1.ProtocolTCP, ep("10.244.5.1:8080"), ep("[fd00:244::5]:8080"))),
	}
	gone := types.NamespacedName{Namespace: "default", Name: "none"}
	w.remove(gone)
	mustSync(t, p, partialRequest(w.snap, append(changed, gone)...))
	list()

	// A client pinned by affinity; the resync must keep it.
	sh(t, "nft add element ip portal 'affinity-default/sticky/tcp/80/10.244.4.1_8080-t600' '{ 10.0.0.99 }'")
	w.remove(types.NamespacedName{Namespace: "default", Name: "udp"})
	mustSync(t, p, fullRequest(w.snap))
	list()
	if !strings.Contains(out[2], "10.0.0.99") {
		t.Errorf("the periodic resync lost an affinity entry:\n%s", excerpt(out[2], "affinity-default/sticky/tcp/80/10.244.4.1"))
	}

	// A restart: a new proxier finds the table and syncs a world
	// without some Services, with a new one.
	w.remove(types.NamespacedName{Namespace: "default", Name: "lb"})
	w.remove(types.NamespacedName{Namespace: "default", Name: "big-affinity"})
	w.set(svc("default/after", "10.96.0.50", port("dns", v1.ProtocolUDP, 53, 30200)), endpointsFor("dns", v1.ProtocolUDP, ep("10.244.6.1:53")))
	p2 := restarted()
	mustSync(t, p2, fullRequest(w.snap))
	list()
	if err := p2.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}
