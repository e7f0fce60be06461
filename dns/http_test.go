package dns

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Each HTTP path is served on the address of its flag, as CoreDNS serves
// them: /ready on the ready plugin's own port (8181 by default) as well as
// on the health port, /health only on the health port, /metrics only on
// the metrics port.
func TestHTTPEndpoints(t *testing.T) {
	const (
		health  = "127.0.0.1:8080"
		ready   = "127.0.0.1:8181"
		metrics = "127.0.0.1:9153"
	)
	type get struct {
		addr, path string
		want       int
	}
	tests := []struct {
		name        string
		o           Options
		before      []get // while the informers have not synced
		after       []get
		wantListens int
	}{
		{
			name: "defaults: three ports",
			o:    DefaultOptions(),
			before: []get{
				{ready, "/ready", http.StatusServiceUnavailable},
				{health, "/ready", http.StatusServiceUnavailable},
				{health, "/health", http.StatusOK},
			},
			after: []get{
				{ready, "/ready", http.StatusOK},
				{ready, "/health", http.StatusNotFound},
				{ready, "/metrics", http.StatusNotFound},
				{health, "/ready", http.StatusOK},
				{health, "/health", http.StatusOK},
				{health, "/metrics", http.StatusNotFound},
				{metrics, "/metrics", http.StatusOK},
				{metrics, "/ready", http.StatusNotFound},
			},
			wantListens: 3,
		},
		{
			name: "one port for all",
			o:    Options{HealthBindAddress: health, ReadyBindAddress: health, MetricsBindAddress: health},
			after: []get{
				{health, "/ready", http.StatusOK},
				{health, "/health", http.StatusOK},
				{health, "/metrics", http.StatusOK},
			},
			wantListens: 1,
		},
		{
			name:        "ready port off: /ready stays on the health port",
			o:           Options{HealthBindAddress: health},
			after:       []get{{health, "/ready", http.StatusOK}, {health, "/health", http.StatusOK}},
			wantListens: 1,
		},
		{
			name:        "ready port alone",
			o:           Options{ReadyBindAddress: ready},
			after:       []get{{ready, "/ready", http.StatusOK}, {ready, "/health", http.StatusNotFound}},
			wantListens: 1,
		},
		{name: "all off", o: Options{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(nil, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			s.reg = prometheus.NewRegistry() // Run makes it once the forwarder is set up
			muxes := s.httpMuxes()
			if len(muxes) != tc.wantListens {
				t.Errorf("listeners: got %d, want %d", len(muxes), tc.wantListens)
			}
			check := func(when string, gets []get) {
				for _, g := range gets {
					m, ok := muxes[g.addr]
					if !ok {
						t.Errorf("%s: nothing served on %s", when, g.addr)
						continue
					}
					rec := httptest.NewRecorder()
					m.mux.ServeHTTP(rec, httptest.NewRequest("GET", "http://"+g.addr+g.path, nil))
					if rec.Code != g.want {
						t.Errorf("%s: GET %s%s: got %d, want %d", when, g.addr, g.path, rec.Code, g.want)
					}
				}
			}
			check("before sync", tc.before)
			s.markReady()
			check("after sync", tc.after)
		})
	}
}
