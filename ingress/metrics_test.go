package ingress

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"portal.dev/portal/ingress/route"
)

func TestStatusClass(t *testing.T) {
	for _, tc := range []struct {
		code int
		want string
	}{
		{0, "other"}, {99, "other"}, {100, "1xx"}, {199, "1xx"}, {200, "2xx"}, {302, "3xx"},
		{404, "4xx"}, {499, "4xx"}, {503, "5xx"}, {599, "5xx"}, {600, "other"},
	} {
		if got := statusClass(tc.code); got != tc.want {
			t.Errorf("statusClass(%d): got %q, want %q", tc.code, got, tc.want)
		}
	}
}

// Requests of one rule are counted in their own series whether the
// series was looked up before or not, and the duration histogram of the
// Ingress has every one; the same with the series of a connection's
// last request at hand.
func TestRequestSeries(t *testing.T) {
	for _, conn := range []bool{false, true} {
		m := NewMetrics()
		var last *lastSeries
		if conn {
			last = &lastSeries{}
		}
		webSvc := &route.Backend{Service: types.NamespacedName{Namespace: "default", Name: "web"}}
		web := route.Match{Backend: webSvc, Ingress: types.NamespacedName{Namespace: "default", Name: "web"}, Host: "foo.com", Path: "/"}
		other := web
		other.Path = "/other"
		other.Backend = &route.Backend{Service: types.NamespacedName{Namespace: "default", Name: "other"}}
		m.request(web, "GET", 200, time.Millisecond, last)
		m.request(web, "GET", 204, time.Millisecond, last)
		m.request(web, "GET", 503, time.Millisecond, last)
		m.request(other, "GET", 200, time.Millisecond, last)
		m.request(web, "GET", 200, time.Millisecond, last)
		m.request(route.Match{}, "GET", 404, time.Millisecond, last)
		checkRequestSeries(t, m)
		want := map[string]BackendCounts{"default/web": {Requests: 4, Errors: 1}, "default/other": {Requests: 1}}
		if got := m.Backends().Services; !maps.Equal(got, want) {
			t.Errorf("backends, last series %v: got %v, want %v", conn, got, want)
		}
	}
}

func checkRequestSeries(t *testing.T, m *Metrics) {
	t.Helper()
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"default/web", "foo.com", "/", "GET", "2xx"}, 3},
		{[]string{"default/web", "foo.com", "/other", "GET", "2xx"}, 1},
		{[]string{"default/web", "foo.com", "/", "GET", "5xx"}, 1},
		{[]string{"", "", "", "GET", "4xx"}, 1},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(tc.labels...)); got != tc.want {
			t.Errorf("requests%v: got %v, want %v", tc.labels, got, tc.want)
		}
	}
	if got := testutil.CollectAndCount(m.duration); got != 2 {
		t.Errorf("got %d duration series, want 2 (default/web and none)", got)
	}
}
