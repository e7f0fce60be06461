package userspace

import (
	"context"
	"sync"
	"time"
)

// workerIdle is how long an idle worker waits for work before it exits.
const workerIdle = 10 * time.Second

// workers runs the data path's work (one accepted connection, one
// direction of a spliced one) on goroutines that outlive the work. A new
// goroutine starts with a small stack, which the dial and splice paths
// grow by copying it, on every connection; a worker has grown its stack
// once. Work never waits for a worker: without an idle one, a new one
// starts.
type workers struct {
	ctx  context.Context // workers exit when it ends
	wg   *sync.WaitGroup // counts the workers
	work chan func()     // unbuffered: a send succeeds only to an idle worker
}

func newWorkers(ctx context.Context, wg *sync.WaitGroup) *workers {
	return &workers{ctx: ctx, wg: wg, work: make(chan func())}
}

// run runs fn on an idle worker, or on a new one.
func (w *workers) run(fn func()) {
	select {
	case w.work <- fn:
	default:
		w.wg.Add(1)
		go w.loop(fn)
	}
}

func (w *workers) loop(fn func()) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		fn()
		fn = nil // not kept alive while idle
		idle.Reset(workerIdle)
		select {
		case fn = <-w.work:
		case <-idle.C:
			return
		case <-w.ctx.Done():
			return
		}
	}
}
