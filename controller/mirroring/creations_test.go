package mirroring

import (
	"testing"
	"time"
)

func TestCreations(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		steps  func(c *creations)
		cached []string
		now    time.Time
		want   bool
	}{
		{"nothing created", func(c *creations) {}, nil, t0, false},
		{"created, not cached yet", func(c *creations) { c.expect("ns/a", "a-1", t0) }, nil, t0, true},
		{"created and cached", func(c *creations) { c.expect("ns/a", "a-1", t0) }, []string{"a-1"}, t0, false},
		{"created and observed", func(c *creations) { c.expect("ns/a", "a-1", t0); c.observe("ns/a", "a-1") }, nil, t0, false},
		{"another key's creation", func(c *creations) { c.expect("ns/b", "b-1", t0) }, nil, t0, false},
		{"given up after the timeout", func(c *creations) { c.expect("ns/a", "a-1", t0) }, nil, t0.Add(creationTimeout + time.Second), false},
		{"forgotten", func(c *creations) { c.expect("ns/a", "a-1", t0); c.forget("ns/a") }, nil, t0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c creations
			tc.steps(&c)
			if got := c.unseen("ns/a", tc.cached, tc.now); got != tc.want {
				t.Errorf("got unseen %v, want %v", got, tc.want)
			}
		})
	}
}
