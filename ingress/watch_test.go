package ingress

import (
	"bufio"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// The watch timer stays set across requests (issue #18): a request is
// still watched only once it has itself lasted watchDelay, however long
// before the timer was set by another, and one that ended is not.
func TestWatchAfterOwnDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := net.Pipe()
		defer server.Close()
		c := &h1Conn{conn: server, br: bufio.NewReader(server), cancel: func() {}}
		watching := func() bool {
			synctest.Wait()
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.watching
		}
		c.watch(time.Now())
		c.unwatch()
		time.Sleep(watchDelay - time.Millisecond)
		c.watch(time.Now())
		time.Sleep(watchDelay - time.Millisecond)
		if watching() {
			t.Fatalf("watched %v into the request, want after %v", watchDelay-time.Millisecond, watchDelay)
		}
		time.Sleep(time.Millisecond)
		if !watching() {
			t.Fatalf("not watched %v into the request", watchDelay)
		}
		c.unwatch()
		client.Close()
		<-c.watched
		c.watching = false

		c.watch(time.Now())
		c.unwatch()
		time.Sleep(2 * watchDelay)
		if watching() {
			t.Errorf("a request that ended was watched")
		}
	})
}
