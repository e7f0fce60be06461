package ingress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
)

// A connection is served by the goroutine that served the one before,
// rather than a new one whose stack grows again, and closing the workers
// ends the kept ones.
func TestWorkerKeptForNextConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := &testBed{routes: &fakeRoutes{}}
		o := DefaultOptions()
		o.AccessLog = false
		h := NewHandler(func() Routes { return tb.routes }, o, NewMetrics())
		s := &Servers{}
		s.add(pipeListener{}, h, nil)
		l := s.listeners[0]
		for i := range 3 {
			client, server := net.Pipe()
			s.serve(l, server)
			io.WriteString(client, "GET / HTTP/1.1\r\nHost: nowhere.test\r\nConnection: close\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(client), nil)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("connection %d: got %d, want 404", i, resp.StatusCode)
			}
			client.Close()
			synctest.Wait()
			if got := len(s.workers.idle); got != 1 {
				t.Errorf("after connection %d: %d idle workers, want 1", i, got)
			}
		}
		s.workers.close()
		if got := len(s.workers.idle); got != 0 {
			t.Errorf("after close: %d idle workers, want 0", got)
		}
	})
}
