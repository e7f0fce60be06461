package userspace

import (
	"fmt"
	"net/netip"
	"testing"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.244.0.%d:8080", 10+i)
	}
	return out
}

func client(i int) Conn {
	return Conn{Client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)}), uint16(40000+i%1000)),
		Frontend: netip.MustParseAddrPort("10.96.0.10:80")}
}

func TestSchedulers(t *testing.T) {
	loads := []int64{5, 0, 3}
	load := func(i int) int64 { return loads[i] }
	tests := []struct {
		name  string
		sched string
		// check gets the backend picked for each of 30 conns from distinct clients.
		check func(t *testing.T, picks []int)
	}{
		{"rr cycles", SchedulerRoundRobin, func(t *testing.T, picks []int) {
			for i, p := range picks {
				if p != i%3 {
					t.Fatalf("pick %d: got %d, want %d", i, p, i%3)
				}
			}
		}},
		{"lc picks the least loaded", SchedulerLeastConn, allEqual(1)},
		{"sed with equal weights is lc", SchedulerShortestExpected, allEqual(1)},
		{"nq picks an idle one", SchedulerNeverQueue, allEqual(1)},
		{"dh sends one frontend to one backend", SchedulerDestinationHash, func(t *testing.T, picks []int) { allEqual(picks[0])(t, picks) }},
		{"random uses everyone", SchedulerRandom, usesAll},
		{"sh spreads clients", SchedulerSourceHash, usesAll},
		{"maglev spreads clients", SchedulerMaglev, usesAll},
		{"unknown is rr", "wrr", usesAll},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScheduler(tc.sched, names(3), load)
			var picks []int
			for i := range 300 {
				picks = append(picks, s.Pick(client(i), nil))
			}
			tc.check(t, picks)
		})
	}
}

func allEqual(want int) func(*testing.T, []int) {
	return func(t *testing.T, picks []int) {
		for i, p := range picks {
			if p != want {
				t.Fatalf("pick %d: got %d, want %d", i, p, want)
			}
		}
	}
}

func usesAll(t *testing.T, picks []int) {
	counts := map[int]int{}
	for _, p := range picks {
		counts[p]++
	}
	for i := range 3 {
		if counts[i] < 50 { // of 300: a fair share is 100
			t.Errorf("backend %d got %d of 300, want a fair share: %v", i, counts[i], counts)
		}
	}
}

func TestSchedulersSkipTried(t *testing.T) {
	for _, name := range Schedulers {
		t.Run(name, func(t *testing.T) {
			s := NewScheduler(name, names(3), func(int) int64 { return 0 })
			for i := range 50 {
				got := s.Pick(client(i), func(j int) bool { return j != 2 })
				if got != 2 {
					t.Fatalf("got %d, want 2 (the only untried backend)", got)
				}
			}
			if got := s.Pick(client(0), func(int) bool { return true }); got != -1 {
				t.Errorf("all tried: got %d, want -1", got)
			}
			if got := NewScheduler(name, nil, nil).Pick(client(0), nil); got != -1 {
				t.Errorf("no backends: got %d, want -1", got)
			}
		})
	}
}

// TestMaglevMinimalDisruption: removing one of n backends moves only the
// clients that were on it; adding one moves about 1/(n+1) of them.
func TestMaglevMinimalDisruption(t *testing.T) {
	const clients = 5000
	tests := []struct {
		name     string
		before   []string
		after    []string
		maxMoved float64 // fraction of clients not on a removed backend
	}{
		{"remove one of 10", names(10), append(names(10)[:4:4], names(10)[5:]...), 0.05},
		{"add one to 10", names(10), names(11), 1.0/11 + 0.05},
		{"remove one of 3", names(3), names(3)[1:], 0.05},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, after := newMaglev(tc.before), newMaglev(tc.after)
			removed := map[string]bool{}
			for _, n := range tc.before {
				removed[n] = true
			}
			for _, n := range tc.after {
				delete(removed, n)
			}
			moved, stayed := 0, 0
			for i := range clients {
				b := tc.before[before.Pick(client(i), nil)]
				a := tc.after[after.Pick(client(i), nil)]
				if removed[b] {
					continue
				}
				stayed++
				if a != b {
					moved++
				}
			}
			if frac := float64(moved) / float64(stayed); frac > tc.maxMoved {
				t.Errorf("got %.3f of clients moved, want at most %.3f", frac, tc.maxMoved)
			}
		})
	}
}

func TestMaglevBalance(t *testing.T) {
	m := newMaglev(names(7))
	counts := make([]int, 7)
	for _, b := range m.table {
		counts[b]++
	}
	fair := len(m.table) / 7
	for i, c := range counts {
		if c < fair*9/10 || c > fair*11/10 {
			t.Errorf("backend %d has %d table entries, want about %d", i, c, fair)
		}
	}
}
