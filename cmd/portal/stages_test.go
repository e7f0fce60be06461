package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// Each stage stops only once the stages before it have finished, whether
// the server's context ended or a component returned early.
func TestStagesStopInOrder(t *testing.T) {
	errFailed := errors.New("failed")
	tests := []struct {
		name    string
		failing bool // the node stage's first component fails
		wantErr error
	}{
		{"context ends", false, nil},
		{"a component fails", true, errFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var stopped []string
			record := func(name string) {
				mu.Lock()
				defer mu.Unlock()
				stopped = append(stopped, name)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := newStages(ctx)
			fail := make(chan struct{})
			s.run(nodeStage, func(ctx context.Context) error {
				select {
				case <-fail:
					record("dns")
					return errFailed
				case <-ctx.Done():
					record("dns")
					return ctx.Err()
				}
			})
			for _, c := range []struct {
				stage int
				name  string
			}{{nodeStage, "proxy"}, {controllerStage, "controllers"}, {apiStage, "apiserver"}} {
				s.run(c.stage, func(ctx context.Context) error {
					<-ctx.Done()
					record(c.name)
					return nil
				})
			}
			if tt.failing {
				close(fail)
			} else {
				cancel()
			}
			err := s.wait(ctx)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got error %v, want %v", err, tt.wantErr)
			}
			// The two node components stop in either order.
			node := stopped[:2]
			slices.Sort(node)
			want := []string{"dns", "proxy", "controllers", "apiserver"}
			if got := append(node, stopped[2:]...); !slices.Equal(got, want) {
				t.Errorf("stopped %v, want %v", got, want)
			}
		})
	}
}
