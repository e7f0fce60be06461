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

// serveHTTP serves /health and /ready (as CoreDNS's health and ready
// plugins: /health is ok while the process serves, /ready once the
// informers have synced) and /metrics, until ctx ends. Both on one port
// when the addresses are the same.
func (s *Server) serveHTTP(ctx context.Context, wg *sync.WaitGroup) error {
	muxes := map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if muxes[addr] == nil {
			muxes[addr] = http.NewServeMux()
		}
		return muxes[addr]
	}
	if a := s.o.HealthBindAddress; a != "" {
		m := mux(a)
		m.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "OK") })
		m.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
			if !s.Ready() {
				http.Error(w, "informers not synced", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "OK")
		})
	}
	if a := s.o.MetricsBindAddress; a != "" {
		mux(a).Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	}
	type served struct {
		l net.Listener
		m *http.ServeMux
	}
	var all []served
	for addr, m := range muxes {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, sv := range all {
				sv.l.Close()
			}
			flag := "--metrics-bind-address"
			if addr == s.o.HealthBindAddress {
				flag = "--health-bind-address"
			}
			return fmt.Errorf("%s %s: %w", flag, addr, err)
		}
		all = append(all, served{l, m})
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
