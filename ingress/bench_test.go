package ingress

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"portal.dev/portal/ingress/route"
)

// BenchmarkKeepAlive sends GETs of a 1 KiB body through the proxy to a
// local endpoint over keep-alive connections on both sides, as
// bench/ingress's keep-alive load does; client and endpoint share the
// process, so the figures are for comparing changes of the proxy, not
// for comparing proxies.
func BenchmarkKeepAlive(b *testing.B) {
	payload := strings.Repeat("x", 1024)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, payload)
	}))
	b.Cleanup(backend.Close)
	o := DefaultOptions()
	o.AccessLog = false
	tb := newTestBed(b, o)
	tb.backend("foo.com", route.Match{}, addr(backend))
	client := &http.Client{Transport: &http.Transport{}}
	req, _ := http.NewRequest("GET", "http://"+tb.http+"/1k.bin", nil)
	req.Host = "foo.com"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := io.Copy(io.Discard, resp.Body); n != int64(len(payload)) || resp.StatusCode != 200 {
			b.Fatalf("got %d with %d bytes, want 200 with %d", resp.StatusCode, n, len(payload))
		}
		resp.Body.Close()
	}
}
