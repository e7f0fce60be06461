package ingress

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"portal.dev/portal/ingress/route"
)

// isHopByHop tells the same fields as hopByHop lists, and no others.
func TestIsHopByHop(t *testing.T) {
	for _, k := range hopByHop {
		if !isHopByHop(k) {
			t.Errorf("isHopByHop(%q): got false, want true", k)
		}
	}
	for _, k := range []string{"Content-Type", "Content-Length", "connection", "Date", "Trailers", ""} {
		if isHopByHop(k) {
			t.Errorf("isHopByHop(%q): got true, want false", k)
		}
	}
}

// notForwarded holds back every field the proxy sets itself or that is
// hop-by-hop: its switch lists them again, and must not miss one.
func TestNotForwarded(t *testing.T) {
	for _, k := range append(append([]string{"Forwarded", "Host", "Content-Length", "User-Agent"}, forwardedFields[:]...), hopByHop[:]...) {
		if !notForwarded(k) {
			t.Errorf("notForwarded(%q): got false, want true", k)
		}
	}
	for _, k := range []string{"Accept", "Cookie", "X-Forwarded", "x-request-id"} {
		if notForwarded(k) {
			t.Errorf("notForwarded(%q): got true, want false", k)
		}
	}
}

// The loop's response writer takes the endpoint's header map itself when
// it has no field of its own (one map write per field fewer, issue #18),
// and gets a copy when it has, keeping its own fields.
func TestRespondHeaderAdopted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		preset    http.Header
		wantSame  bool
		wantField string
	}{
		{name: "empty writer takes the map", wantSame: true},
		{name: "writer with a field gets a copy", preset: http.Header{"X-Own": {"1"}}, wantField: "X-Own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			hw := &h1Response{bw: bufio.NewWriter(&out)}
			hw.reset(&http.Request{Method: http.MethodGet}, false)
			for k, v := range tc.preset {
				hw.h[k] = v
			}
			resp := &http.Response{StatusCode: http.StatusOK, ContentLength: 2, Body: io.NopCloser(strings.NewReader("ok")),
				Header: http.Header{"Content-Length": {"2"}, "Connection": {"X-Hop"}, "X-Hop": {"1"}, "Keep-Alive": {"timeout=5"}, "X-End": {"e"}}}
			if err := respond(&recorder{ResponseWriter: hw}, resp, nil); err != nil {
				t.Fatalf("respond: %v", err)
			}
			same := reflect.ValueOf(hw.h).UnsafePointer() == reflect.ValueOf(resp.Header).UnsafePointer()
			if same != tc.wantSame {
				t.Errorf("writer's header is the endpoint's map: got %v, want %v", same, tc.wantSame)
			}
			hw.finish()
			head := out.String()
			for _, f := range []string{"X-End: e\r\n", "Content-Length: 2\r\n", tc.wantField} {
				if !strings.Contains(head, f) {
					t.Errorf("got response %q, want it to have %q", head, f)
				}
			}
			for _, f := range []string{"X-Hop", "Keep-Alive", "Connection"} {
				if strings.Contains(head, f) {
					t.Errorf("got response %q, want no %s", head, f)
				}
			}
		})
	}
}

// A request answered on the direct path lasts, in the metrics and the
// access log, until the path let go of the endpoint: record takes that
// reading of the clock rather than one of its own (issue #18).
func TestRecordEndsWithDirectPath(t *testing.T) {
	var log bytes.Buffer
	o := DefaultOptions()
	h := NewHandler(func() Routes { return &fakeRoutes{} }, o, NewMetrics())
	h.accessLog = &accessLog{w: &log}
	l := &listenerHandler{Handler: h, port: "80"}
	start := time.Now().Add(-time.Hour)
	req := &request{id: "id"}
	req.ended = start.Add(2500 * time.Millisecond)
	r, _ := http.NewRequest(http.MethodGet, "http://foo.com/", nil)
	r.RemoteAddr = "127.0.0.1:1"
	l.record(r, route.Match{}, &recorder{code: http.StatusOK}, req, start)
	if got := log.String(); !strings.Contains(got, " 2.500 ") {
		t.Errorf("got access log %q, want a request time of 2.500", got)
	}
}
