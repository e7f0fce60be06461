package ingress

import (
	"net/http"
	"regexp"
	"testing"

	"portal.dev/portal/ingress/route"
)

// The access log is on by default and has one line per request, in the
// documented format, whatever the client sends.
func TestAccessLog(t *testing.T) {
	tb := newTestBed(t, DefaultOptions())
	backend := addr(echo(t, "foo"))
	tb.backend("foo.com", route.Match{}, backend)
	for _, tc := range []struct {
		path   string
		header map[string]string
	}{
		{path: "/a?x=1", header: map[string]string{"User-Agent": "test/1", "Referer": "http://ref/", "X-Request-ID": "id-1"}},
		{path: "/b", header: map[string]string{"User-Agent": "forged\" 200 0 \"x", "X-Request-ID": "two words"}},
	} {
		req, _ := http.NewRequest("GET", "http://"+tb.http+tc.path, nil)
		req.Host = "foo.com"
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		body(t, tb.do(t, req))
	}
	req, _ := http.NewRequest("GET", "http://"+tb.http+"/", nil)
	req.Host = "nowhere.com"
	body(t, tb.do(t, req))

	time := `\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\]`
	want := []string{
		`^127\.0\.0\.1 - ` + time + ` "GET /a\?x=1 HTTP/1\.1" 200 \d+ "http://ref/" "test/1" \d+\.\d{3} "foo\.com" default/web ` + regexp.QuoteMeta(backend) + ` id-1\n$`,
		`^127\.0\.0\.1 - ` + time + ` "GET /b HTTP/1\.1" 200 \d+ "-" "forged\\" 200 0 \\"x" \d+\.\d{3} "foo\.com" default/web ` + regexp.QuoteMeta(backend) + ` "two words"\n$`,
		`^127\.0\.0\.1 - ` + time + ` "GET / HTTP/1\.1" 404 \d+ "-" "Go-http-client/1\.1" \d+\.\d{3} "nowhere\.com" - - [0-9a-f]{32}\n$`,
	}
	got := tb.accessLines()
	if len(got) != len(want)+1 || got[len(want)] != "" {
		t.Fatalf("got access log %q, want %d lines", got, len(want))
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(got[i]) {
			t.Errorf("line %d: got %q, want it to match %s", i, got[i], w)
		}
	}
}

// --access-log=false writes nothing.
func TestAccessLogOff(t *testing.T) {
	o := DefaultOptions()
	o.AccessLog = false
	tb := newTestBed(t, o)
	if tb.handler.accessLog != nil {
		t.Errorf("access log on with AccessLog false")
	}
}
