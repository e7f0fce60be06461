package pace

import (
	"fmt"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newPacer(period time.Duration) (*Pacer[string], *fakeClock) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return &Pacer[string]{Period: period, Now: clk.now}, clk
}

func TestDelay(t *testing.T) {
	const period = 200 * time.Millisecond
	tests := []struct {
		name string
		// steps run in order: "sync" starts a sync of key a, a duration
		// moves the clock, "check" compares Delay(a) with want.
		steps []any
		want  time.Duration
	}{
		{name: "never synced", want: 0},
		{name: "just synced", steps: []any{"sync"}, want: period},
		{name: "within the period", steps: []any{"sync", 50 * time.Millisecond}, want: 150 * time.Millisecond},
		{name: "after the period", steps: []any{"sync", period}, want: 0},
		{name: "long after", steps: []any{"sync", time.Hour}, want: 0},
		{name: "the latest sync counts", steps: []any{"sync", 150 * time.Millisecond, "sync", 100 * time.Millisecond}, want: 100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, clk := newPacer(period)
			for _, s := range tc.steps {
				switch s := s.(type) {
				case string:
					p.Started("a")
				case time.Duration:
					clk.advance(s)
				}
			}
			if got := p.Delay("a"); got != tc.want {
				t.Errorf("Delay: got %s, want %s", got, tc.want)
			}
			if got := p.Delay("b"); got != 0 {
				t.Errorf("Delay of a key never synced: got %s, want 0", got)
			}
		})
	}
}

func TestZeroValueNeverDelays(t *testing.T) {
	var p Pacer[string]
	p.Started("a")
	if got := p.Delay("a"); got != 0 {
		t.Errorf("Delay: got %s, want 0", got)
	}
	if got := p.Len(); got != 0 {
		t.Errorf("keys remembered: got %d, want 0", got)
	}
}

func TestForget(t *testing.T) {
	p, _ := newPacer(time.Second)
	p.Started("a")
	p.Forget("a")
	if got := p.Delay("a"); got != 0 {
		t.Errorf("Delay after Forget: got %s, want 0", got)
	}
}

// Keys synced once and never again must not pile up.
func TestOldKeysAreDropped(t *testing.T) {
	p, clk := newPacer(time.Second)
	for i := range 10 * minSweep {
		p.Started(fmt.Sprint(i))
		clk.advance(100 * time.Millisecond)
	}
	if got := p.Len(); got > 2*minSweep {
		t.Errorf("keys remembered after %d one-off syncs: got %d, want at most %d", 10*minSweep, got, 2*minSweep)
	}
	if got := p.Delay(fmt.Sprint(10*minSweep - 1)); got != 900*time.Millisecond {
		t.Errorf("Delay of the last key synced: got %s, want 900ms", got)
	}
}
