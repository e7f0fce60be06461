package workload

import (
	"context"
	"sync"
)

// SlowStart calls fn count times in batches of 1, 2, 4, ... calls run in
// parallel, stopping after the first batch in which a call fails, as
// upstream creates Pods: a template the API server rejects costs one
// failed create, not count of them, while a good one still reaches count
// in a logarithmic number of rounds. Each call gets its index, 0 to
// count-1. SlowStart returns how many calls succeeded and the first
// error of the failing batch.
func SlowStart(ctx context.Context, count int, fn func(ctx context.Context, i int) error) (int, error) {
	done := 0
	for batch := min(count, 1); batch > 0; batch = min(2*batch, count-done) {
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for j := range batch {
			wg.Go(func() { errs[j] = fn(ctx, done+j) })
		}
		wg.Wait()
		var first error
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case first == nil:
				first = err
			}
		}
		if first != nil {
			return done + ok, first
		}
		done += batch
	}
	return done, nil
}
