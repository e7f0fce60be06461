package snapshotwindow

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type etcdAt int64

func (e etcdAt) CompactRevision() int64 { return int64(e) }

func TestCompactRevision(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name    string
		etcd    interface{ CompactRevision() int64 }
		samples map[int]int64 // seconds after t0 -> revision
		now     int
		want    int64
	}{
		{name: "nothing known", now: 100, want: 0},
		{name: "etcd's compaction alone", etcd: etcdAt(40), now: 100, want: 40},
		{name: "no sample a window old yet", samples: map[int]int64{10: 100, 20: 200}, now: 80, want: 0},
		{name: "the newest sample a window old", samples: map[int]int64{0: 100, 5: 150, 10: 200, 20: 300}, now: 85, want: 200},
		{name: "exactly a window old counts", samples: map[int]int64{0: 100, 5: 150}, now: 80, want: 150},
		{name: "etcd compacted later than the window", etcd: etcdAt(250), samples: map[int]int64{0: 100, 10: 200}, now: 90, want: 250},
		{name: "without etcd's compaction", etcd: nil, samples: map[int]int64{0: 100}, now: 1000, want: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.etcd, 75*time.Second)
			for s := 0; s <= tc.now; s++ {
				if rev, ok := tc.samples[s]; ok {
					c.Observe(at(s), rev)
				}
			}
			if got := c.compactRevision(at(tc.now)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// A server up for days must not keep a sample per interval.
func TestObserveKeepsOnlyWhatMatters(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	c := New(nil, 75*time.Second)
	for s := 0; s < 10000; s += 5 {
		c.Observe(t0.Add(time.Duration(s)*time.Second), int64(s))
	}
	if got, max := len(c.samples), 75/5+1; got > max {
		t.Errorf("got %d samples, want at most %d", got, max)
	}
	if got, want := c.compactRevision(t0.Add(9995*time.Second)), int64(9995-75); got != want {
		t.Errorf("got revision %d, want %d", got, want)
	}
}

func TestRunSamplesUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(nil, time.Minute)
		var rev int64
		current := func(context.Context) (int64, error) {
			rev += 10
			if rev == 20 {
				return 0, errors.New("etcd unavailable")
			}
			return rev, nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			c.Run(ctx, 5*time.Second, current)
			close(done)
		}()
		// Samples at 0 s (10), 5 s (failed), 10 s (30), ... 60 s (130).
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if got := c.CompactRevision(); got != 10 {
			t.Errorf("a minute after start: got %d, want the first sample's 10", got)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := c.CompactRevision(); got != 30 {
			t.Errorf("71 s after start: got %d, want 30 (the 5 s read failed)", got)
		}
		cancel()
		<-done
	})
}
