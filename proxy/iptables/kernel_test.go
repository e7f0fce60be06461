//go:build linux

package iptables

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/proxy/internal/netnstest"
	"portal.dev/portal/proxy/leftovers"
	"portal.dev/portal/proxy/snapshot"
)

// TestKernelScale measures real iptables-nft-restore runs for N Services
// x 10 endpoints (PORTAL_IPT_SCALE=N, as root) in a throwaway network
// namespace: the first full sync, and partial syncs of one changed
// Service, with the size of each restore input. It is slow, so it only
// runs when asked.
func TestKernelScale(t *testing.T) {
	if os.Getenv("PORTAL_IPT_SCALE") == "" {
		t.Skip("skipped: set PORTAL_IPT_SCALE=10000 to measure real iptables-nft-restore at 10,000 Services")
	}
	if !netnstest.Enter(t, "iptables-nft-restore") {
		return
	}
	n, err := strconv.Atoi(os.Getenv("PORTAL_IPT_SCALE"))
	if err != nil || n < 1 {
		t.Fatalf("PORTAL_IPT_SCALE=%q: want a number of Services", os.Getenv("PORTAL_IPT_SCALE"))
	}
	rec := &recorder{}
	p := NewWithTools(Config{Run: rec.run, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}, DefaultTools[:1])
	s := bigSnapshot(n, 10)
	ctx := context.Background()
	timed := func(what string, req snapshot.Request) {
		t.Helper()
		rec.log, rec.input = nil, 0
		start := time.Now()
		if err := p.Sync(ctx, req); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v, restore input %d KiB (%s)", what, time.Since(start).Round(time.Millisecond), rec.input>>10, strings.Join(rec.log, ", "))
	}
	timed(fmt.Sprintf("first full sync, %d Services x 10 endpoints", n), snapshot.Request{Snapshot: s, Full: true})
	full := rec.input
	timed("full resync on top", snapshot.Request{Snapshot: s, Full: true})

	nn := types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("web-%d", n/2)}
	next := *s
	next.Endpoints = clone(s.Endpoints)
	next.Endpoints[nn] = endpoints("10.250.0.1:8080", "10.250.0.2:8080")
	timed("partial sync, one Service's endpoints changed", snapshot.Request{Snapshot: &next, Changed: map[types.NamespacedName]struct{}{nn: {}}})
	if got, max := rec.input, full/100; got > max {
		t.Errorf("a partial sync wrote %d bytes, want at most 1/100 of the full sync's %d", got, full)
	}
	timed("partial sync, changed back", snapshot.Request{Snapshot: s, Changed: map[types.NamespacedName]struct{}{nn: {}}})

	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("iptables-nft-save").CombinedOutput()
	if err != nil || strings.Contains(string(out), leftovers.ChainPrefix) {
		t.Errorf("after Cleanup (%v):\n%.2000s", err, out)
	}
}

// recorder runs the commands for real and notes their cost.
type recorder struct {
	log   []string
	input int // bytes of restore input
}

func (r *recorder) run(ctx context.Context, name string, args []string, stdin string) (string, error) {
	start := time.Now()
	out, err := leftovers.ExecRunner(ctx, name, args, stdin)
	entry := fmt.Sprintf("%s %v", name, time.Since(start).Round(time.Millisecond))
	if stdin != "" {
		entry += fmt.Sprintf(" input %d KiB %d lines", len(stdin)>>10, strings.Count(stdin, "\n"))
		r.input += len(stdin)
	}
	r.log = append(r.log, entry)
	return out, err
}

// bigSnapshot is n Services web-0..web-(n-1) with a NodePort each and
// eps endpoints each.
func bigSnapshot(n, eps int) *snapshot.Snapshot {
	svcs := map[string]*snapshot.Service{}
	all := map[string]*snapshot.ServiceEndpoints{}
	for i := range n {
		name := fmt.Sprintf("default/web-%d", i)
		cip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		svcs[name] = service(name, cip.String())
		var addrs []string
		for j := range eps {
			k := i*eps + j
			addrs = append(addrs, fmt.Sprintf("10.%d.%d.%d:8080", 128+k>>16&127, k>>8&255, k&255))
		}
		all[name] = endpoints(addrs...)
	}
	return snap(svcs, all)
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
