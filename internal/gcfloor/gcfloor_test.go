package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name                        string
		floor, live, stack, globals uint64
		base, want                  int
	}{
		{name: "small live heap raised to the floor", floor: 64 * mib, live: 8 * mib, base: 100, want: 700},
		{name: "stacks and globals count as scanned", floor: 64 * mib, live: 6 * mib, stack: 1 * mib, globals: 1 * mib, base: 100, want: 725},
		{name: "GOGC's goal above the floor", floor: 64 * mib, live: 40 * mib, base: 100, want: 100},
		{name: "live heap over the floor", floor: 64 * mib, live: 80 * mib, base: 100, want: 100},
		{name: "a base above what the floor needs", floor: 64 * mib, live: 16 * mib, base: 400, want: 400},
		{name: "nearly empty heap bounded", floor: 64 * mib, live: 1024, base: 100, want: maxPercent},
		{name: "nothing scanned yet", floor: 64 * mib, base: 100, want: 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.floor, tc.live, tc.stack, tc.globals, tc.base); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// TestStartRaisesGoal checks on the test process itself that the heap
// goal is at the floor at once and after collections, and that stop
// restores GOGC.
func TestStartRaisesGoal(t *testing.T) {
	// A live heap of 16 MiB puts the floor's GOGC near 700, below the
	// bound a nearly empty heap would hit.
	const floor = 128 << 20
	live := make([]*[1 << 20]byte, 16)
	for i := range live {
		live[i] = new([1 << 20]byte)
	}
	defer runtime.KeepAlive(live)
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	runtime.GC()
	stop := Start(floor, 100)
	checkGoal(t, "at once", floor)
	for range 3 {
		runtime.GC()
		// The hook runs on the cleanup goroutine after the collection.
		time.Sleep(20 * time.Millisecond)
	}
	checkGoal(t, "after collections", floor)
	stop()
	if got := readUint64("/gc/gogc:percent"); got != 100 {
		t.Errorf("got GOGC %d after stop, want 100", got)
	}
}

// checkGoal fails t unless the heap goal is within a tenth of want.
func checkGoal(t *testing.T, when string, want uint64) {
	t.Helper()
	if goal := readUint64("/gc/heap/goal:bytes"); goal < want*9/10 || goal > want*11/10 {
		t.Errorf("%s: got a heap goal of %d bytes (GOGC %d), want about %d", when, goal, readUint64("/gc/gogc:percent"), want)
	}
}

func readUint64(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
