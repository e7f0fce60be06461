package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type recorder struct {
	mu    sync.Mutex
	start time.Time
	runs  []run
	fail  int // fail this many runs first
}

type run struct {
	at       time.Duration
	periodic bool
}

func (r *recorder) fn(ctx context.Context, periodic bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, run{time.Since(r.start), periodic})
	if r.fail > 0 {
		r.fail--
		return errors.New("injected")
	}
	return nil
}

func (r *recorder) got() []run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]run(nil), r.runs...)
}

func equalRuns(a, b []run) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRunner(t *testing.T) {
	tests := []struct {
		name  string
		fail  int
		steps func(r *Runner)
		until time.Duration
		want  []run
	}{{
		name:  "a trigger runs at once",
		steps: func(r *Runner) { r.Trigger() },
		until: 5 * time.Second,
		want:  []run{{0, false}},
	}, {
		name: "beyond the burst, triggers coalesce into one run when a token is back",
		steps: func(r *Runner) {
			r.Trigger()
			time.Sleep(100 * time.Millisecond)
			r.Trigger()
			time.Sleep(100 * time.Millisecond)
			r.Trigger()
			r.Trigger()
		},
		until: 5 * time.Second,
		// Two tokens at the start, one back per second: the second
		// token is gone at 100ms and 0.1s of a token is back at 200ms.
		want: []run{{0, false}, {100 * time.Millisecond, false}, {time.Second, false}},
	}, {
		// Regression: a pod that turned not-ready right after another
		// endpoint change waited for the minimum interval (1 s), so it
		// left rotation later than "within 1 s" although nothing else
		// had changed for a long time.
		name: "a change right after another one after a quiet period runs at once",
		steps: func(r *Runner) {
			time.Sleep(5 * time.Second)
			r.Trigger()
			time.Sleep(300 * time.Millisecond)
			r.Trigger()
		},
		until: 9 * time.Second,
		want:  []run{{5 * time.Second, false}, {5*time.Second + 300*time.Millisecond, false}},
	}, {
		name: "steady triggers run once per minimum interval",
		steps: func(r *Runner) {
			for range 8 {
				r.Trigger()
				time.Sleep(250 * time.Millisecond)
			}
		},
		until: 3 * time.Second,
		// The burst at 0 and 250ms; the token that came back meanwhile
		// is whole at 1s, then one a second.
		want: []run{{0, false}, {250 * time.Millisecond, false}, {time.Second, false}, {2 * time.Second, false}},
	}, {
		name:  "periodic runs every period with nothing else happening",
		until: 25 * time.Second,
		want:  []run{{10 * time.Second, true}, {20 * time.Second, true}},
	}, {
		name: "triggered runs do not postpone the periodic one",
		steps: func(r *Runner) {
			for range 4 {
				time.Sleep(3 * time.Second)
				r.Trigger()
			}
		},
		until: 15 * time.Second,
		want:  []run{{3 * time.Second, false}, {6 * time.Second, false}, {9 * time.Second, false}, {10 * time.Second, true}, {12 * time.Second, false}},
	}, {
		name:  "a failed run retries with doubling backoff until it succeeds",
		fail:  3,
		steps: func(r *Runner) { r.Trigger() },
		until: 9 * time.Second,
		// minInterval 1s: retry after 1s, 2s, 4s.
		want: []run{{0, false}, {time.Second, false}, {3 * time.Second, false}, {7 * time.Second, false}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{start: time.Now(), fail: tc.fail}
				r := New(rec.fn, time.Second, 10*time.Second)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { r.Run(ctx); close(done) }()
				synctest.Wait()
				if tc.steps != nil {
					tc.steps(r)
				}
				time.Sleep(tc.until - time.Since(rec.start))
				synctest.Wait()
				cancel()
				<-done
				if got := rec.got(); !equalRuns(got, tc.want) {
					t.Errorf("runs: got %v, want %v", got, tc.want)
				}
			})
		})
	}
}

func TestBackoffCapsAtPeriod(t *testing.T) {
	r := New(nil, 0, 5*time.Second)
	for failures, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 10: 5 * time.Second} {
		if got := r.backoff(failures); got != want {
			t.Errorf("backoff(%d): got %v, want %v", failures, got, want)
		}
	}
}
