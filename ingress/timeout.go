package ingress

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// idleTimer cancels a request whose endpoint is silent too long, as
// nginx's proxy_read_timeout and proxy_send_timeout bound each operation
// on the endpoint, not the whole exchange. It runs only while the proxy
// waits on the endpoint: for the response head, during a read of the
// response body (read timeout), and while a chunk of the request body is
// being sent (send timeout). While the proxy waits on the client (a
// client that reads the response slowly, or uploads slowly) it is paused:
// that is the client's time, bounded by the server's client timeouts.
type idleTimer struct {
	t          *time.Timer
	read, send time.Duration

	mu sync.Mutex
	// waits counts the waits on the endpoint under way: for the response
	// head, and each read of the response body.
	waits int
	// clientBusy is set while a read of the request body from the
	// client is outstanding.
	clientBusy bool
	// sending is set from a chunk of the request body read until the
	// next read of it: the chunk is on its way to the endpoint.
	sending bool
	stopped bool
}

// newIdleTimer returns a timer that calls cancel when the endpoint of a
// request is silent too long, running at once: the request goes out and
// its response head is awaited.
func newIdleTimer(cancel func(error), a *attempt) *idleTimer {
	it := &idleTimer{read: a.read, send: a.send, waits: 1}
	if it.send <= 0 {
		it.send = it.read
	}
	if it.read <= 0 {
		return it
	}
	it.t = time.AfterFunc(it.read, func() { cancel(errUpstreamTimeout) })
	return it
}

// update arms or pauses the timer for the state after a change; arming
// restarts the count, as each operation has the whole timeout.
func (it *idleTimer) updateLocked() {
	switch {
	case it.stopped || it.clientBusy:
		it.t.Stop()
	case it.sending:
		it.t.Reset(it.send)
	case it.waits > 0:
		it.t.Reset(it.read)
	default:
		it.t.Stop()
	}
}

// change applies f to the state under the lock and updates the timer.
func (it *idleTimer) change(f func()) {
	if it == nil || it.t == nil {
		return
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	f()
	it.updateLocked()
}

// clientReading pauses the timer while the request body is read from
// the client.
func (it *idleTimer) clientReading() {
	it.change(func() { it.clientBusy, it.sending = true, false })
}

// clientRead resumes the timer after a read of the request body; got
// says whether it returned data, which now goes to the endpoint.
func (it *idleTimer) clientRead(got bool) {
	it.change(func() { it.clientBusy, it.sending = false, got })
}

// responding ends the wait for the response head. The body's reads are
// timed one by one; an upgraded connection (101 Switching Protocols) is
// not timed, as it may be idle as long as its peers like.
func (it *idleTimer) responding(resp *http.Response) {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		it.stop()
		return
	}
	it.change(func() { it.waits-- })
	resp.Body = &timedBody{ReadCloser: resp.Body, timer: it}
}

func (it *idleTimer) stop() {
	it.change(func() { it.stopped = true })
}

// timedBody runs the read timeout during each read of a response body,
// and only then: between reads the proxy writes to the client.
type timedBody struct {
	io.ReadCloser
	timer *idleTimer
}

func (b *timedBody) Read(p []byte) (int, error) {
	b.timer.change(func() { b.timer.waits++ })
	n, err := b.ReadCloser.Read(p)
	b.timer.change(func() { b.timer.waits-- })
	return n, err
}

// clientBody sets a read deadline on the client's connection (or HTTP/2
// stream) before each read of the request body, timeout from then
// (Options.ClientBodyTimeout), and clears it at the end of the body, so
// that it cannot cut off the response. A read that runs past its
// deadline leaves it set: whatever reads the connection next (the server
// discarding the rest of the body) fails at once rather than waiting on a
// client that stalled.
type clientBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration

	mu sync.Mutex
	// waitingUntil is the deadline of the read under way, or of the read
	// that timed out; zero between reads.
	waitingUntil time.Time
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.timeout <= 0 {
		return b.ReadCloser.Read(p)
	}
	deadline := time.Now().Add(b.timeout)
	b.rc.SetReadDeadline(deadline)
	b.setWaiting(deadline)
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
		b.setWaiting(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
	default:
		b.setWaiting(time.Time{})
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *clientBody) setWaiting(t time.Time) {
	b.mu.Lock()
	b.waitingUntil = t
	b.mu.Unlock()
}

// stalled reports whether the client has kept a read of its body waiting
// past the timeout. It does not wait for that read to return: the
// transport may give up on the request (its context ends as the server
// sees the read fail) before the read has.
func (b *clientBody) stalled() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.waitingUntil.IsZero() && !time.Now().Before(b.waitingUntil)
}

// abortStalled ends a request whose client stalled its body as nginx
// does at its client_body_timeout: the connection is closed with no
// answer, and the request is logged and counted as 408 Request Timeout.
func abortStalled(w http.ResponseWriter) {
	if rec, ok := w.(*recorder); ok {
		rec.code = http.StatusRequestTimeout
	}
	panic(http.ErrAbortHandler)
}
