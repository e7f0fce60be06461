package ingress

import (
	"testing"
	"time"
)

func TestEjection(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &balancer{now: func() time.Time { return now }}
	addrs := []string{"10.0.0.1:80", "10.0.0.2:80"}
	bad := b.state(addrs[0])
	picks := func() map[string]int {
		got := map[string]int{}
		for range 100 {
			got[b.pick(addrs, nil, b.now()).addr]++
		}
		return got
	}
	bad.eject(now)
	if got := picks(); got[addrs[0]] != 0 {
		t.Errorf("ejected endpoint picked %d times of 100", got[addrs[0]])
	}
	// The last usable endpoint is never ejected: with only the ejected
	// one listed, it is still picked.
	if got := b.pick(addrs[:1], nil, b.now()); got != bad {
		t.Errorf("got %v, want the ejected endpoint as the last one", got)
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		fail    bool
		want    bool // ejected after the step
	}{
		{name: "still ejected before 5s", advance: 4 * time.Second, want: true},
		{name: "back after 5s", advance: time.Second, want: false},
		{name: "fails again soon: 10s", fail: true, want: true},
		{name: "still ejected at 9s", advance: 9 * time.Second, want: true},
		{name: "back after 10s", advance: time.Second, want: false},
		{name: "fails again long after: 5s again", advance: time.Minute, fail: true, want: true},
		{name: "back after 5s again", advance: 5 * time.Second, want: false},
	} {
		now = now.Add(step.advance)
		if step.fail {
			bad.eject(now)
		}
		if got := bad.ejected(now); got != step.want {
			t.Fatalf("%s: got ejected %v, want %v", step.name, got, step.want)
		}
	}
	if got := picks(); got[addrs[0]] == 0 || got[addrs[1]] == 0 {
		t.Errorf("got picks %v, want both endpoints", got)
	}
}

// Of two endpoints the one with fewer requests in flight is picked.
func TestPickFewerInFlight(t *testing.T) {
	b := &balancer{now: time.Now}
	addrs := []string{"10.0.0.1:80", "10.0.0.2:80"}
	b.state(addrs[0]).inFlight.Add(3)
	for range 20 {
		if got := b.pick(addrs, nil, b.now()).addr; got != addrs[1] {
			t.Fatalf("got %s, want the idle %s", got, addrs[1])
		}
	}
	// An endpoint already tried is not picked again.
	if got := b.pick(addrs, []*endpoint{b.state(addrs[1])}, b.now()).addr; got != addrs[0] {
		t.Errorf("got %s, want the untried %s", got, addrs[0])
	}
	if got := b.pick(addrs, []*endpoint{b.state(addrs[0]), b.state(addrs[1])}, b.now()); got != nil {
		t.Errorf("got %s with every endpoint tried, want none", got.addr)
	}
}

// Endpoints with nothing in flight and no recent ejection are forgotten.
func TestSweep(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &balancer{now: func() time.Time { return now }}
	busy, ejected := b.state("10.0.0.1:80"), b.state("10.0.0.3:80")
	b.state("10.0.0.2:80") // idle
	busy.inFlight.Add(1)
	ejected.eject(now)
	count := func() int {
		n := 0
		b.endpoints.Range(func(any, any) bool { n++; return true })
		return n
	}
	b.sweep(now)
	if got := count(); got != 2 {
		t.Errorf("after the first sweep: got %d endpoints, want 2 (busy, ejected)", got)
	}
	now = now.Add(time.Minute)
	busy.inFlight.Add(-1)
	b.sweep(now)
	if got := count(); got != 0 {
		t.Errorf("a minute later: got %d endpoints, want none", got)
	}
}

// clockAfter reads the clock after its argument: later than a reading
// taken between the two, and no later than one that follows.
func TestClockAfter(t *testing.T) {
	before := time.Now()
	time.Sleep(2 * time.Millisecond)
	between := time.Now()
	got := clockAfter(before)
	after := time.Now()
	if got.Before(between) || got.After(after) {
		t.Errorf("got %v after the first reading, want between %v and %v", got.Sub(before), between.Sub(before), after.Sub(before))
	}
}
