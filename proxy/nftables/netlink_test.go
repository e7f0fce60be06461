//go:build linux

package nftables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/nftables/netlink"
	"portal.dev/portal/proxy/snapshot"
)

// recordFull returns what a first full sync of w writes for family.
func recordFull(t testing.TB, cfg Config, w *world, family knftables.Family) *netlink.Recording {
	t.Helper()
	var nft4, nft6 knftables.Interface
	if family == knftables.IPv6Family {
		nft6 = knftables.NewFake(family, tableName)
	} else {
		nft4 = knftables.NewFake(family, tableName)
	}
	p := NewWithInterfaces(cfg, nft4, nft6)
	rec := &netlink.Recording{}
	p.set.Families[0].full(rec, w.snap, nil)
	return rec
}

// TestNetlinkEncodesEveryShape: every rule, set, map and element the
// proxier writes in a full sync encodes as netlink, in both families and
// every configuration, so no full sync falls back to nft. (That the
// encoding is what nft writes is TestNetlinkKernel's job.)
func TestNetlinkEncodesEveryShape(t *testing.T) {
	nodePorts := testNode()
	nodePorts.NodePorts = snapshot.NodePortAddresses{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}}
	for _, tc := range []struct {
		name string
		cfg  Config
		node *snapshot.Node
	}{
		{"cluster CIDRs", Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/64")}}, nil},
		{"cluster CIDRs not on a byte boundary", Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/14"), netip.MustParsePrefix("fd00:244::/60")}}, nil},
		{"masquerade all", Config{MasqueradeAll: true}, nil},
		{"no cluster CIDR", Config{}, nil},
		{"NodePort addresses", Config{}, nodePorts},
	} {
		for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
			t.Run(tc.name+"/"+string(family), func(t *testing.T) {
				w := kernelWorld()
				w.set(svc("default/big-affinity", "10.96.0.30,fd00:96::30", affinity(time.Hour)), endpointsFor("http", v1.ProtocolTCP, manyEndpoints(70)...))
				if tc.node != nil {
					w.snap.Node = tc.node
				}
				rec := recordFull(t, tc.cfg, w, family)
				if _, err := netlink.NewWriter(family, tableName).Encode(rec); err != nil {
					t.Errorf("got %v, want a netlink batch", err)
				}
			})
		}
	}
}

func manyEndpoints(n int) []*snapshot.Endpoint {
	out := make([]*snapshot.Endpoint, n)
	for i := range out {
		out[i] = ep(fmt.Sprintf("10.244.9.%d:80", i+1))
		if i%2 == 1 {
			out[i] = ep(fmt.Sprintf("[fd00:244::9:%x]:80", i+1))
		}
	}
	return out
}

// TestNetlinkRefusesUnknown: what the encoder does not know is refused
// as a whole, before anything is sent.
func TestNetlinkRefusesUnknown(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  knftables.Object
	}{
		{"rule statement", &knftables.Rule{Chain: "services", Rule: "ip daddr 10.0.0.1 log accept"}},
		{"rule with a comment", &knftables.Rule{Chain: "services", Rule: "accept", Comment: knftables.PtrTo("x")}},
		{"verdict not last", &knftables.Rule{Chain: "services", Rule: "drop ip daddr 10.0.0.1"}},
		{"set type", &knftables.Set{Name: "s", Type: "ether_addr"}},
		{"map typeof", &knftables.Map{Name: "m", TypeOf: "ip saddr : ip daddr"}},
		{"element of an undeclared set", &knftables.Element{Set: "elsewhere", Key: []string{"10.0.0.1"}}},
		{"chain policy", &knftables.Chain{Name: "c", Type: knftables.PtrTo(knftables.FilterType), Hook: knftables.PtrTo(knftables.InputHook), Priority: knftables.PtrTo(knftables.BaseChainPriority("0")), Policy: knftables.PtrTo(knftables.DropPolicy)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &netlink.Recording{}
			rec.Add(&knftables.Table{})
			rec.Add(&knftables.Chain{Name: "services"})
			rec.Add(tc.obj)
			w := netlink.NewWriter(knftables.IPv4Family, tableName)
			if _, err := w.Encode(rec); !errors.Is(err, netlink.ErrNotEncodable) {
				t.Errorf("got error %v, want ErrNotEncodable", err)
			}
		})
	}
}

// failingBatch is a batchWriter whose every Write fails with err.
type failingBatch struct {
	err   error
	calls int
}

func (f *failingBatch) Write(context.Context, *netlink.Recording) error {
	f.calls++
	return f.err
}

func (f *failingBatch) Wrote(*netlink.Recording) {}

// writeFailures are the netlink writer's three ways to fail, and whether
// the sync then goes through nft.
var writeFailures = []struct {
	name     string
	err      error
	fallback bool
}{
	{"not encodable", fmt.Errorf("%w: test", netlink.ErrNotEncodable), true},
	{"not sent", fmt.Errorf("%w: test", netlink.ErrNotSent), true},
	{"refused by the kernel", errors.New("commit: invalid argument"), false},
}

// TestFullSyncFallsBackToNFT: a full sync the netlink writer cannot
// encode or send is written by knftables, the same ruleset as without
// the writer; one the kernel refused is not retried through nft (the
// kernel would refuse it again) but fails.
func TestFullSyncFallsBackToNFT(t *testing.T) {
	w := kernelWorld()
	plain, f4, f6 := newFakeProxier(withCIDR)
	mustSync(t, plain, fullRequest(w.snap))
	for _, tc := range writeFailures {
		t.Run(tc.name, func(t *testing.T) {
			p, g4, g6 := newFakeProxier(withCIDR)
			failing := &failingBatch{err: tc.err}
			for _, fp := range p.set.Families {
				fp.batch = failing
			}
			err := p.Sync(context.Background(), fullRequest(w.snap))
			if failing.calls != 2 {
				t.Errorf("netlink writer asked %d times, want 2 (one per family)", failing.calls)
			}
			if !tc.fallback {
				if err == nil || strings.Contains(canonicalDump(g4), "service-default/web") {
					t.Errorf("got error %v and a ruleset through nft, want the kernel's error and nothing through nft", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want the sync through nft", err)
			}
			for _, pair := range [][2]*knftables.Fake{{f4, g4}, {f6, g6}} {
				want, got := canonicalDump(pair[0]), canonicalDump(pair[1])
				if got != want || !strings.Contains(got, "service-default/web") {
					t.Errorf("fallback ruleset differs:\n%s", diffLines(want, got))
				}
			}
		})
	}
}

// TestPartialSyncFallsBackToNFT: a partial sync the netlink writer
// cannot encode or send is written by knftables; one the kernel refused
// fails and leaves the table as it was.
func TestPartialSyncFallsBackToNFT(t *testing.T) {
	w := kernelWorld()
	change := func(w *world) types.NamespacedName {
		return w.set(svc("default/web2", "10.96.0.20"), endpointsFor("http", v1.ProtocolTCP, ep("10.244.1.5:8080", "local"), ep("10.244.2.99:8080")))
	}
	plain, f4, f6 := newFakeProxier(withCIDR)
	mustSync(t, plain, fullRequest(w.snap))
	before := canonicalDump(f4)
	w2 := &world{snap: w.snap}
	mustSync(t, plain, partialRequest(w2.snap, change(w2)))
	for _, tc := range writeFailures {
		t.Run(tc.name, func(t *testing.T) {
			p, g4, g6 := newFakeProxier(withCIDR)
			mustSync(t, p, fullRequest(w.snap))
			failing := &failingBatch{err: tc.err}
			for _, fp := range p.set.Families {
				fp.batch = failing
			}
			w2 := &world{snap: w.snap}
			err := p.Sync(context.Background(), partialRequest(w2.snap, change(w2)))
			if failing.calls != 2 {
				t.Errorf("netlink writer asked %d times, want 2 (one per family)", failing.calls)
			}
			if !tc.fallback {
				if err == nil || canonicalDump(g4) != before {
					t.Errorf("got error %v and a changed table, want the kernel's error and the table as it was", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want the sync through nft", err)
			}
			for _, pair := range [][2]*knftables.Fake{{f4, g4}, {f6, g6}} {
				if want, got := canonicalDump(pair[0]), canonicalDump(pair[1]); got != want {
					t.Errorf("fallback ruleset differs:\n%s", diffLines(want, got))
				}
			}
			if !strings.Contains(canonicalDump(g4), "10.244.2.99") {
				t.Error("the partial sync did not reach the table")
			}
		})
	}
}

// BenchmarkNetlinkEncode10k: encoding a full sync of 10,000 Services x 10
// endpoints as netlink, without the kernel.
func BenchmarkNetlinkEncode10k(b *testing.B) {
	w := bigWorld(10000, 10)
	rec := recordFull(b, withCIDR, w, knftables.IPv4Family)
	nw := netlink.NewWriter(knftables.IPv4Family, tableName)
	var size int
	b.ResetTimer()
	for b.Loop() {
		var err error
		if size, err = nw.Encode(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rec.NumOperations()), "ops/tx")
	b.ReportMetric(float64(size)/(1<<20), "MiB/tx")
}

// BenchmarkFullSyncNetlink10k: what a full sync of 10,000 Services x 10
// endpoints costs in Go on the netlink path, building the objects and
// encoding them, without the kernel. Its endpoints name no node, as
// bench/proxy's do, so each is also a hairpin element (230,000
// operations).
func BenchmarkFullSyncNetlink10k(b *testing.B) {
	w := bigWorld(10000, 10)
	for _, eps := range w.snap.Endpoints {
		for _, list := range eps.ByPort {
			for _, e := range list {
				e.NodeName = ""
			}
		}
	}
	p := NewWithInterfaces(withCIDR, knftables.NewFake(knftables.IPv4Family, tableName), nil)
	nw := netlink.NewWriter(knftables.IPv4Family, tableName)
	var n, ops int
	b.ResetTimer()
	for b.Loop() {
		fp := p.set.Families[0]
		fp.reset()
		rec := netlink.NewRecording(n + n/8)
		fp.full(rec, w.snap, nil)()
		if _, err := nw.Encode(rec); err != nil {
			b.Fatal(err)
		}
		n, ops = rec.Len(), rec.NumOperations()
	}
	b.ReportMetric(float64(ops), "ops/tx")
}
