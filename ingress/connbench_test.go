package ingress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkConnSetUp serves a new client connection per request, each
// answered by the controller itself (404, no endpoint), over in-memory
// pipes: what is left is the loop's own cost per connection, without
// the kernel's, in allocations and CPU time per connection.
func BenchmarkConnSetUp(b *testing.B) {
	o := DefaultOptions()
	o.AccessLog = false
	h := NewHandler(func() Routes { return &fakeRoutes{} }, o, NewMetrics())
	s := &Servers{}
	s.add(pipeListener{}, h, nil)
	b.Cleanup(s.workers.close)
	l := s.listeners[0]
	br := bufio.NewReader(nil)
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		client, server := net.Pipe()
		s.serve(l, server)
		io.WriteString(client, "GET / HTTP/1.1\r\nHost: nowhere.test\r\nConnection: close\r\n\r\n")
		br.Reset(client)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		client.Close()
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-us/op")
}
