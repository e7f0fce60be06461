package ingress

import (
	"net"
	"sync"
)

// maxIdleWorkers bounds the goroutines kept waiting for a connection; a
// burst of more leaves the rest to end.
const maxIdleWorkers = 128

// workers are the goroutines that serve accepted connections, each kept,
// once its connection ends, for the next one. A new goroutine per
// connection starts with a small stack (the runtime starts goroutines at
// the average size of the process's stacks, which its many shallow ones
// keep small) that then grows, copied at each doubling, to the depth of a
// proxied request: for a client that connects for each request, that was
// a larger cost than the goroutine's start. A kept one has its stack
// grown already.
type workers struct {
	mu     sync.Mutex
	idle   []chan accepted // last in, first out: the warmest stack first
	closed bool
	// running counts the workers, for close to wait for.
	running sync.WaitGroup
}

// accepted is a connection for a worker, with the listener it came from.
type accepted struct {
	l    *servedListener
	conn net.Conn
}

// serve has conn served by an idle worker, or by a new one.
func (s *Servers) serve(l *servedListener, conn net.Conn) {
	w := &s.workers
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		next := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		next <- accepted{l, conn} // buffered: the worker is waiting for it
		return
	}
	w.mu.Unlock()
	w.running.Add(1)
	go s.work(accepted{l, conn})
}

// work serves a, then the connections it is given while idle, until it
// is not kept.
func (s *Servers) work(a accepted) {
	defer s.workers.running.Done()
	var next chan accepted
	for {
		s.serveConn(a.l, a.conn)
		if next == nil {
			next = make(chan accepted, 1)
		}
		if !s.workers.wait(next) {
			return
		}
		var ok bool
		if a, ok = <-next; !ok {
			return
		}
	}
}

// wait adds next to the idle workers, unless there are enough of them or
// the servers are done.
func (w *workers) wait(next chan accepted) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.idle) >= maxIdleWorkers {
		return false
	}
	w.idle = append(w.idle, next)
	return true
}

// close ends the idle workers and those that finish later, and returns
// once they have all ended; no connection may be given to them after.
func (w *workers) close() {
	w.mu.Lock()
	w.closed = true
	for _, next := range w.idle {
		close(next)
	}
	w.idle = nil
	w.mu.Unlock()
	w.running.Wait()
}
