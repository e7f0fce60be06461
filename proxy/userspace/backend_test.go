package userspace

import (
	"net/netip"
	"testing"
	"time"

	"portal.dev/portal/proxy/snapshot"
)

func endpointsAt(n int) []*snapshot.Endpoint {
	out := make([]*snapshot.Endpoint, n)
	for i := range out {
		out[i] = &snapshot.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 244, 0, byte(10 + i)}), Port: 8080, Ready: true, Serving: true}
	}
	return out
}

// TestAffinityTableBounded pins a bug: ClientIP affinity entries went only
// when their endpoint left, so a Service with affinity and a stream of
// distinct clients grew its table without bound. Expired entries must go,
// and the live ones must keep their endpoint.
func TestAffinityTableBounded(t *testing.T) {
	const (
		timeout  = 10 * time.Second
		every    = 6 * time.Second // a client of one round has expired two rounds later
		perRound = 1000
		rounds   = 50
	)
	tests := []struct {
		name  string
		sched string
	}{
		{"rr", SchedulerRoundRobin},
		{"maglev", SchedulerMaglev},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := &servicePort{metrics: newMetrics(nil), all: map[netip.AddrPort]*backend{}, affinity: map[netip.Addr]affinityEntry{}}
			bs := sp.backends(endpointsAt(3))
			r := &route{sp: sp, backends: bs, sched: sp.scheduler(tc.sched, bs), affinity: timeout}
			connect := func(c Conn, now time.Time) int {
				i := r.pick(c, nil, now)
				r.remember(c.Client.Addr(), bs[i], now)
				return i
			}
			// regular comes back every round: its entry never expires.
			regular := Conn{Client: netip.MustParseAddrPort("10.200.0.1:40000"), Frontend: netip.MustParseAddrPort("10.96.0.10:80")}
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			first := connect(regular, start)
			// At most two rounds' clients and regular are live at once.
			const live = 2*perRound + 1
			for round := range rounds {
				now := start.Add(time.Duration(round) * every)
				for i := range perRound {
					connect(client(round*perRound+i), now)
				}
				if got := connect(regular, now); got != first {
					t.Fatalf("round %d: regular client got endpoint %d, want %d (its affinity)", round, got, first)
				}
				if got := len(sp.affinity); got > 2*live {
					t.Fatalf("round %d: %d affinity entries with %d live clients, want at most %d", round, got, live, 2*live)
				}
			}
		})
	}
}
