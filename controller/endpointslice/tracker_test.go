package endpointslice

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func sliceAt(uid, rv string) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}}
}

func TestSliceTracker(t *testing.T) {
	const key = "ns/web"
	now := t0
	cases := []struct {
		name string
		// setup records writes; at is the time stale/shouldSync run.
		setup      func(tr *sliceTracker)
		at         time.Time
		event      *discovery.EndpointSlice
		wantSync   bool
		cached     []*discovery.EndpointSlice
		wantStale  bool
		wantOurDel bool // observeDeletion(event) result
	}{
		{
			name:       "slice we never wrote is news",
			setup:      func(tr *sliceTracker) {},
			event:      sliceAt("u1", "5"),
			wantSync:   true,
			wantOurDel: false,
		},
		{
			name:      "our write, reflected in the cache, is not news",
			setup:     func(tr *sliceTracker) { tr.wrote(key, sliceAt("u1", "5")) },
			event:     sliceAt("u1", "5"),
			cached:    []*discovery.EndpointSlice{sliceAt("u1", "5")},
			wantSync:  false,
			wantStale: false,
		},
		{
			name:      "someone else's later write is news",
			setup:     func(tr *sliceTracker) { tr.wrote(key, sliceAt("u1", "5")) },
			event:     sliceAt("u1", "9"),
			cached:    []*discovery.EndpointSlice{sliceAt("u1", "9")},
			wantSync:  true,
			wantStale: false,
		},
		{
			name:      "cache older than our update is stale",
			setup:     func(tr *sliceTracker) { tr.wrote(key, sliceAt("u1", "7")) },
			event:     sliceAt("u1", "5"),
			cached:    []*discovery.EndpointSlice{sliceAt("u1", "5")},
			wantStale: true,
		},
		{
			name:      "cache without our created slice is stale",
			setup:     func(tr *sliceTracker) { tr.wrote(key, sliceAt("u2", "7")) },
			event:     sliceAt("u1", "5"),
			cached:    []*discovery.EndpointSlice{sliceAt("u1", "5")},
			wantSync:  true,
			wantStale: true,
		},
		{
			name:       "cache still holding our deleted slice is stale",
			setup:      func(tr *sliceTracker) { tr.deleted(key, sliceAt("u1", "5")) },
			event:      sliceAt("u1", "5"),
			cached:     []*discovery.EndpointSlice{sliceAt("u1", "5")},
			wantSync:   true,
			wantStale:  true,
			wantOurDel: true,
		},
		{
			name:      "a write the cache never shows is given up after the grace period",
			setup:     func(tr *sliceTracker) { tr.wrote(key, sliceAt("u2", "7")) },
			at:        now.Add(staleGrace + time.Second),
			event:     sliceAt("u1", "5"),
			cached:    []*discovery.EndpointSlice{sliceAt("u1", "5")},
			wantSync:  true,
			wantStale: false,
		},
		{
			name:      "versions that are not numbers are trusted",
			setup:     func(tr *sliceTracker) { tr.wrote(key, sliceAt("u1", "b")) },
			event:     sliceAt("u1", "a"),
			cached:    []*discovery.EndpointSlice{sliceAt("u1", "a")},
			wantSync:  true,
			wantStale: false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := now
			tr := &sliceTracker{now: func() time.Time { return clock }}
			tc.setup(tr)
			if !tc.at.IsZero() {
				clock = tc.at
			}
			if got := tr.shouldSync(key, tc.event); got != tc.wantSync {
				t.Errorf("shouldSync: got %v, want %v", got, tc.wantSync)
			}
			if got := tr.stale(key, tc.cached); got != tc.wantStale {
				t.Errorf("stale: got %v, want %v", got, tc.wantStale)
			}
			if got := tr.observeDeletion(key, tc.event); got != tc.wantOurDel {
				t.Errorf("observeDeletion: got %v, want %v", got, tc.wantOurDel)
			}
		})
	}
}

func TestTriggerTimes(t *testing.T) {
	const key = "ns/web"
	svc := mkSvc()
	a, b := mkPod("a", "10.0.0.1"), mkPod("b", "10.0.0.2")
	flipped := with(b, notReady) // Ready transition at t0+2m
	cases := []struct {
		name      string
		committed [][]*corev1.Pod // earlier successful syncs
		pods      []*corev1.Pod
		want      time.Time
	}{
		{name: "service seen first: its creation", pods: []*corev1.Pod{a}, want: svc.CreationTimestamp.Time},
		{name: "nothing new: zero", committed: [][]*corev1.Pod{{a, b}}, pods: []*corev1.Pod{a, b}, want: time.Time{}},
		{name: "readiness flip: its transition time", committed: [][]*corev1.Pod{{a, b}}, pods: []*corev1.Pod{a, flipped}, want: t0.Add(2 * time.Minute)},
		{name: "new pod: its ready transition", committed: [][]*corev1.Pod{{a}}, pods: []*corev1.Pod{a, b}, want: t0.Add(time.Minute)},
		{name: "pod deleted: nothing of its own", committed: [][]*corev1.Pod{{a, b}}, pods: []*corev1.Pod{a}, want: time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tt triggerTimes
			for _, pods := range tc.committed {
				_, st := tt.compute(key, svc, pods)
				tt.commit(key, st)
			}
			got, _ := tt.compute(key, svc, tc.pods)
			if !got.Equal(tc.want) {
				t.Errorf("trigger time: got %v, want %v", got, tc.want)
			}
			// Not committed: the same sync retried reports the same time.
			if again, _ := tt.compute(key, svc, tc.pods); !again.Equal(got) {
				t.Errorf("retried trigger time: got %v, want %v", again, got)
			}
		})
	}
}

func TestPodChangeMapping(t *testing.T) {
	base := mkPod("a", "10.0.0.1")
	cases := []struct {
		name        string
		cur         *corev1.Pod
		wantChanged bool
	}{
		{name: "resync", cur: base, wantChanged: false},
		{name: "container restart", cur: with(base, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 1}}
		}), wantChanged: false},
		{name: "readiness flip", cur: with(base, notReady), wantChanged: true},
		{name: "terminating", cur: with(base, terminating), wantChanged: true},
		{name: "failed", cur: with(base, phase(corev1.PodFailed)), wantChanged: true},
		{name: "new IP", cur: with(base, func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.9"}} }), wantChanged: true},
		{name: "hostname", cur: with(base, hostname("h", "web")), wantChanged: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := podChanged(base, tc.cur); got != tc.wantChanged {
				t.Errorf("podChanged: got %v, want %v", got, tc.wantChanged)
			}
		})
	}

	labelCases := []struct {
		name          string
		before, after []string
		changed       bool
		want          []string
	}{
		{name: "labels only: services that gained or lost the pod", before: []string{"ns/a", "ns/b"}, after: []string{"ns/b", "ns/c"}, want: []string{"ns/a", "ns/c"}},
		{name: "labels and endpoint: every service involved", before: []string{"ns/a", "ns/b"}, after: []string{"ns/b", "ns/c"}, changed: true, want: []string{"ns/a", "ns/b", "ns/c"}},
	}
	for _, tc := range labelCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := affectedServices(tc.before, tc.after, tc.changed); !slices.Equal(got, tc.want) {
				t.Errorf("affectedServices: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSliceTrackerHoldsEventsDuringSync: the watch may deliver our own
// write before the API server's answer is recorded; held until the sync
// ends, such an event is not news, while someone else's write still is.
func TestSliceTrackerHoldsEventsDuringSync(t *testing.T) {
	const key = "ns/web"
	cases := []struct {
		name   string
		during func(tr *sliceTracker)
		want   bool
	}{
		{"our update seen before it is recorded", func(tr *sliceTracker) {
			tr.hold(key, sliceAt("u1", "6"), false)
			tr.wrote(key, sliceAt("u1", "6"))
		}, false},
		{"our create seen before it is recorded", func(tr *sliceTracker) {
			tr.hold(key, sliceAt("u2", "7"), false)
			tr.wrote(key, sliceAt("u2", "7"))
		}, false},
		{"our delete seen before it is recorded", func(tr *sliceTracker) {
			tr.hold(key, sliceAt("u1", "5"), true)
			tr.deleted(key, sliceAt("u1", "5"))
		}, false},
		{"someone else's write during the sync", func(tr *sliceTracker) {
			tr.hold(key, sliceAt("u1", "8"), false)
		}, true},
		{"someone else's delete during the sync", func(tr *sliceTracker) {
			tr.hold(key, sliceAt("u1", "5"), true)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := &sliceTracker{now: func() time.Time { return t0 }}
			tr.wrote(key, sliceAt("u1", "5"))
			if tr.hold(key, sliceAt("u1", "9"), false) {
				t.Fatal("hold kept an event outside a sync")
			}
			tr.begin(key)
			tc.during(tr)
			if got := tr.end(key); got != tc.want {
				t.Errorf("end: got news=%v, want %v", got, tc.want)
			}
			if tr.hold(key, sliceAt("u1", "9"), false) {
				t.Error("hold kept an event after the sync ended")
			}
		})
	}
}
