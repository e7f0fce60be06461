package workload

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestSlowStart(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		count     int
		failFrom  int // calls with index >= failFrom fail; -1 never
		wantOK    int
		wantCalls int
		wantErr   error
	}{
		{name: "none", count: 0, failFrom: -1},
		{name: "all succeed", count: 10, failFrom: -1, wantOK: 10, wantCalls: 10},
		{name: "broken template costs one call", count: 500, failFrom: 0, wantCalls: 1, wantErr: boom},
		// batches 1, 2, 4: indexes 0, 1-2, 3-6; index 5 fails in the third.
		{name: "stops after the failing batch", count: 100, failFrom: 5, wantOK: 5, wantCalls: 7, wantErr: boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			ok, err := SlowStart(context.Background(), tc.count, func(_ context.Context, i int) error {
				calls.Add(1)
				if tc.failFrom >= 0 && i >= tc.failFrom {
					return boom
				}
				return nil
			})
			if ok != tc.wantOK || int(calls.Load()) != tc.wantCalls || !errors.Is(err, tc.wantErr) {
				t.Errorf("got %d ok, %d calls, err %v; want %d ok, %d calls, err %v",
					ok, calls.Load(), err, tc.wantOK, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
