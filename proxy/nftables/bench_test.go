//go:build linux

package nftables

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"portal.dev/portal/proxy/internal/netnstest"
	"portal.dev/portal/proxy/nftables/netlink"
	"portal.dev/portal/proxy/snapshot"
)

// serializingNFT is a knftables.Interface that does what the real one
// does in Go (render the transaction to nft's text) and then discards
// it, so benchmarks measure the proxy's own cost without nft or a kernel.
type serializingNFT struct {
	*knftables.Fake
	bytes int
	ops   int
}

func (s *serializingNFT) Run(_ context.Context, tx *knftables.Transaction) error {
	s.bytes = len(tx.String())
	s.ops = tx.NumOperations()
	return nil
}

// bigWorld has n ClusterIP Services with e endpoints each; a tenth also
// have a NodePort.
func bigWorld(n, e int) *world {
	w := newWorld()
	for i := range n {
		opts := []svcOpt{}
		if i%10 == 0 {
			opts = append(opts, port("http", v1.ProtocolTCP, 80, uint16(30000+i%2768)))
		}
		s := svc(fmt.Sprintf("ns%d/svc%d", i%100, i), fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256), opts...)
		list := make([]*snapshot.Endpoint, e)
		for j := range list {
			k := i*e + j
			list[j] = ep(fmt.Sprintf("10.%d.%d.%d:8080", 128+k/65536, (k/256)%256, k%256))
		}
		w.snap.Services[s.Name] = s
		w.snap.Endpoints[s.Name] = endpointsFor("http", v1.ProtocolTCP, list...)
	}
	return w
}

func newBenchProxier() (*Proxier, *serializingNFT) {
	nft := &serializingNFT{Fake: knftables.NewFake(knftables.IPv4Family, tableName)}
	return NewWithInterfaces(withCIDR, nft, nil), nft
}

// BenchmarkFullSync10k: a full sync of 10,000 Services x 10 endpoints,
// from snapshot to transaction text (goal: < 1 s).
func BenchmarkFullSync10k(b *testing.B) {
	w := bigWorld(10000, 10)
	p, nft := newBenchProxier()
	b.ResetTimer()
	for b.Loop() {
		if err := p.Sync(context.Background(), fullRequest(w.snap)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nft.ops), "ops/tx")
	b.ReportMetric(float64(nft.bytes)/(1<<20), "MiB/tx")
}

// BenchmarkPartialSync10k: one Service's endpoints change among 10,000
// (goal: < 50 ms).
func BenchmarkPartialSync10k(b *testing.B) {
	w := bigWorld(10000, 10)
	p, nft := newBenchProxier()
	if err := p.Sync(context.Background(), fullRequest(w.snap)); err != nil {
		b.Fatal(err)
	}
	nn := types.NamespacedName{Namespace: "ns7", Name: "svc5007"}
	orig := w.snap.Endpoints[nn]
	alt := endpointsFor("http", v1.ProtocolTCP, ep("10.250.0.1:8080"), ep("10.250.0.2:8080"))
	i := 0
	b.ResetTimer()
	snaps := [2]*snapshot.Snapshot{
		{Services: w.snap.Services, Endpoints: cloneWith(w.snap.Endpoints, nn, alt), Node: w.snap.Node},
		{Services: w.snap.Services, Endpoints: cloneWith(w.snap.Endpoints, nn, orig), Node: w.snap.Node},
	}
	for b.Loop() {
		req := partialRequest(snaps[i%2], nn)
		i++
		if err := p.Sync(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nft.ops), "ops/tx")
}

// BenchmarkPartialSyncNetlink10k: the same partial sync on the netlink
// path, building the objects and encoding the batch, without the kernel.
func BenchmarkPartialSyncNetlink10k(b *testing.B) {
	w := bigWorld(10000, 10)
	p, _ := newBenchProxier()
	nw := &encodingWriter{w: netlink.NewWriter(knftables.IPv4Family, tableName)}
	p.set.Families[0].batch = nw
	if err := p.Sync(context.Background(), fullRequest(w.snap)); err != nil {
		b.Fatal(err)
	}
	nn := types.NamespacedName{Namespace: "ns7", Name: "svc5007"}
	orig := w.snap.Endpoints[nn]
	alt := endpointsFor("http", v1.ProtocolTCP, ep("10.250.0.1:8080"), ep("10.250.0.2:8080"))
	snaps := [2]*snapshot.Snapshot{
		{Services: w.snap.Services, Endpoints: cloneWith(w.snap.Endpoints, nn, alt), Node: w.snap.Node},
		{Services: w.snap.Services, Endpoints: cloneWith(w.snap.Endpoints, nn, orig), Node: w.snap.Node},
	}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		req := partialRequest(snaps[i%2], nn)
		i++
		if err := p.Sync(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nw.size), "bytes/tx")
}

func cloneWith(m map[types.NamespacedName]*snapshot.ServiceEndpoints, nn types.NamespacedName, v *snapshot.ServiceEndpoints) map[types.NamespacedName]*snapshot.ServiceEndpoints {
	out := make(map[types.NamespacedName]*snapshot.ServiceEndpoints, len(m))
	for k, e := range m {
		out[k] = e
	}
	out[nn] = v
	return out
}

// TestMemory10k reports the heap the snapshot and the proxier's memory
// of the table take for 10,000 Services x 10 endpoints (part of the
// 250 MiB RSS goal; informer caches come on top).
func TestMemory10k(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := bigWorld(10000, 10)
	p, _ := newBenchProxier()
	if err := p.Sync(context.Background(), fullRequest(w.snap)); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("heap for snapshot + proxier state, 10k Services x 10 endpoints: %.1f MiB", float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))
	runtime.KeepAlive(w)
	runtime.KeepAlive(p)
}

// TestKernelScale measures real nft transactions for 10,000 Services x
// 10 endpoints in a throwaway network namespace. It is slow and only runs
// with PORTAL_NFT_SCALE=1 (as root).
func TestKernelScale(t *testing.T) {
	if os.Getenv("PORTAL_NFT_SCALE") == "" {
		t.Skip("skipped: set PORTAL_NFT_SCALE=1 to measure real nft at 10,000 Services")
	}
	if !netnstest.Enter(t, "nft") {
		return
	}
	nft4, err := knftables.New(knftables.IPv4Family, tableName)
	if err != nil {
		t.Fatal(err)
	}
	p := NewWithInterfaces(withCIDR, nft4, nil)
	w := bigWorld(10000, 10)
	start := time.Now()
	mustSync(t, p, fullRequest(w.snap))
	t.Logf("first full sync, 10k Services x 10 endpoints: %v", time.Since(start))
	start = time.Now()
	mustSync(t, p, fullRequest(w.snap))
	t.Logf("periodic full resync on top: %v", time.Since(start))
	start = time.Now()
	traffic, err := p.Traffic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reading the counters of %d Services: %v", len(traffic.Services), time.Since(start))
	nn := types.NamespacedName{Namespace: "ns7", Name: "svc5007"}
	for i, eps := range []*snapshot.ServiceEndpoints{
		endpointsFor("http", v1.ProtocolTCP, ep("10.250.0.1:8080"), ep("10.250.0.2:8080")),
		w.snap.Endpoints[nn],
	} {
		next := &snapshot.Snapshot{Services: w.snap.Services, Endpoints: cloneWith(w.snap.Endpoints, nn, eps), Node: w.snap.Node}
		start = time.Now()
		mustSync(t, p, partialRequest(next, nn))
		t.Logf("partial sync %d, one Service's endpoints changed: %v", i+1, time.Since(start))
	}
	// One address replaced, the count kept (what bench/proxy does): only
	// map elements change.
	moved := append([]*snapshot.Endpoint{ep("10.250.0.9:8080")}, w.snap.Endpoints[nn].For(snapshot.PortKey{Name: "http", Protocol: v1.ProtocolTCP})[1:]...)
	next := &snapshot.Snapshot{Services: w.snap.Services, Endpoints: cloneWith(w.snap.Endpoints, nn, endpointsFor("http", v1.ProtocolTCP, moved...)), Node: w.snap.Node}
	start = time.Now()
	mustSync(t, p, partialRequest(next, nn))
	t.Logf("partial sync, one endpoint address of one Service replaced: %v", time.Since(start))
	added := svc("new/svc", "10.99.0.1")
	next = &snapshot.Snapshot{Services: cloneSvcWith(w.snap.Services, added), Endpoints: cloneWith(w.snap.Endpoints, added.Name, endpointsFor("http", v1.ProtocolTCP, ep("10.250.1.1:8080"))), Node: w.snap.Node}
	start = time.Now()
	mustSync(t, p, partialRequest(next, added.Name))
	t.Logf("partial sync, one Service added: %v", time.Since(start))
	if err := p.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func cloneSvcWith(m map[types.NamespacedName]*snapshot.Service, s *snapshot.Service) map[types.NamespacedName]*snapshot.Service {
	out := make(map[types.NamespacedName]*snapshot.Service, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[s.Name] = s
	return out
}
