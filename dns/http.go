package dns

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// httpEndpoint is one path served on the address of one flag.
type httpEndpoint struct {
	flag, addr, path string
	handler          http.Handler
}

// httpEndpoints are the DNS server's HTTP paths, as CoreDNS serves them:
// /health is ok while the process serves (the health plugin, on
// --health-bind-address), /ready once the informers have synced (the
// ready plugin's own port, --ready-bind-address, and the health address
// too), /metrics on --metrics-bind-address. Those with an empty address
// are off.
func (s *Server) httpEndpoints() []httpEndpoint {
	health := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "OK") })
	ready := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.Ready() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "OK")
	})
	all := []httpEndpoint{
		{"--health-bind-address", s.o.HealthBindAddress, "/health", health},
		{"--health-bind-address", s.o.HealthBindAddress, "/ready", ready},
		{"--ready-bind-address", s.o.ReadyBindAddress, "/ready", ready},
		{"--metrics-bind-address", s.o.MetricsBindAddress, "/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})},
	}
	var on []httpEndpoint
	for _, e := range all {
		if e.addr != "" {
			on = append(on, e)
		}
	}
	return on
}

// httpAddresses are the addresses of the HTTP endpoints by flag.
func (o Options) httpAddresses() map[string]string {
	return map[string]string{
		"--health-bind-address":  o.HealthBindAddress,
		"--ready-bind-address":   o.ReadyBindAddress,
		"--metrics-bind-address": o.MetricsBindAddress,
	}
}

// httpMux is what one listener serves, and the flag that named its
// address first (for errors).
type httpMux struct {
	flag string
	mux  *http.ServeMux
}

// httpMuxes groups the endpoints by address: paths whose flags give the
// same address share one listener, and a path is served once on it.
func (s *Server) httpMuxes() map[string]httpMux {
	muxes := map[string]httpMux{}
	served := map[string]bool{}
	for _, e := range s.httpEndpoints() {
		m, ok := muxes[e.addr]
		if !ok {
			m = httpMux{flag: e.flag, mux: http.NewServeMux()}
			muxes[e.addr] = m
		}
		if !served[e.addr+e.path] {
			served[e.addr+e.path] = true
			m.mux.Handle(e.path, e.handler)
		}
	}
	return muxes
}

// serveHTTP serves the HTTP endpoints until ctx ends. It fails, naming
// the flag, when an address cannot be listened on.
func (s *Server) serveHTTP(ctx context.Context, wg *sync.WaitGroup) error {
	type served struct {
		l net.Listener
		m *http.ServeMux
	}
	var all []served
	for addr, m := range s.httpMuxes() {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, sv := range all {
				sv.l.Close()
			}
			return fmt.Errorf("%s %s: %w", m.flag, addr, err)
		}
		all = append(all, served{l, m.mux})
	}
	for _, sv := range all {
		srv := &http.Server{Handler: sv.m, ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() {
			if err := srv.Serve(sv.l); err != http.ErrServerClosed {
				klog.ErrorS(err, "DNS HTTP endpoint stopped", "address", sv.l.Addr().String())
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			srv.Close()
		})
	}
	return nil
}
