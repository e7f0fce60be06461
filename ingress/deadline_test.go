package ingress

import (
	"testing"
	"time"
)

func TestNextDeadline(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		at      time.Time
		d       time.Duration
		want    time.Time
		wantSet bool
	}{
		{"none set", time.Time{}, time.Minute, now.Add(time.Minute + maxDeadlineSlack), true},
		{"set far enough", now.Add(time.Minute + time.Millisecond), time.Minute, now.Add(time.Minute + time.Millisecond), false},
		{"set exactly far enough", now.Add(time.Minute), time.Minute, now.Add(time.Minute), false},
		{"set short of the timeout", now.Add(time.Minute - time.Millisecond), time.Minute, now.Add(time.Minute + maxDeadlineSlack), true},
		{"passed", now.Add(-time.Second), time.Minute, now.Add(time.Minute + maxDeadlineSlack), true},
		{"set within the slack", now.Add(time.Minute + maxDeadlineSlack), time.Minute, now.Add(time.Minute + maxDeadlineSlack), false},
		// Regression: a pooled connection kept the read deadline of a
		// request with the default 60 s timeout, and the next request's
		// Ingress asked for 1 s: the endpoint had 60.
		{"set for a longer timeout", now.Add(time.Minute), time.Second, now.Add(time.Second + time.Second/8), true},
		{"short timeout, slack in proportion", time.Time{}, 80 * time.Millisecond, now.Add(90 * time.Millisecond), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, set := nextDeadline(tc.at, now, tc.d)
			if !got.Equal(tc.want) || set != tc.wantSet {
				t.Errorf("got %v, %v; want %v, %v", got.Sub(now), set, tc.want.Sub(now), tc.wantSet)
			}
		})
	}
}
