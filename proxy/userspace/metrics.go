package userspace

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the data path's counters, labelled by Service
// (namespace/name), port name and endpoint (ip:port); per-Service figures
// are their sums. A series is in /metrics while a backend or Service port
// uses it: the last user that goes deletes it.
type metrics struct {
	conns    *prometheus.CounterVec
	active   *prometheus.GaugeVec
	bytes    *prometheus.CounterVec
	failures *prometheus.CounterVec
	denied   *prometheus.CounterVec

	mu    sync.Mutex
	users map[seriesKey]int
}

// seriesKey is one label set; endpoint is empty for a Service port's own
// series (denied).
type seriesKey struct{ service, port, endpoint string }

func newMetrics(reg prometheus.Registerer) *metrics {
	labels := []string{"service", "port", "endpoint"}
	m := &metrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portal_userspace_connections_total", Help: "Connections (TCP) and flows (UDP) proxied, by Service port and endpoint",
		}, labels),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portal_userspace_active_connections", Help: "Open connections and flows, by Service port and endpoint",
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portal_userspace_bytes_total", Help: "Bytes proxied, by Service port, endpoint and direction (to_endpoint, to_client)",
		}, append(labels, "direction")),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portal_userspace_connect_failures_total", Help: "Failed connects to an endpoint (the next one was tried)",
		}, labels),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portal_userspace_denied_total", Help: "Connections refused by loadBalancerSourceRanges",
		}, []string{"service", "port"}),
		users: map[seriesKey]int{},
	}
	if reg != nil {
		reg.MustRegister(m.conns, m.active, m.bytes, m.failures, m.denied)
	}
	return m
}

// backendMetrics are one backend's series, looked up once so that the
// data path only adds to them: a WithLabelValues per connection hashes
// the labels and takes the vector's lock each time.
type backendMetrics struct {
	conns, failures, toEndpoint, toClient prometheus.Counter
	active                                prometheus.Gauge
}

// The detached series stand for those of a backend or Service port that
// has left /metrics: what still counts into them (the last bytes of a
// flow closed under it, a connect that raced the removal) is seen by
// nobody, and does not bring the series back.
var (
	detached        = newMetrics(nil)
	detachedBackend = detached.series(seriesKey{})
	detachedDenied  = detached.denied.WithLabelValues("", "")
)

func (m *metrics) series(k seriesKey) *backendMetrics {
	return &backendMetrics{
		conns:      m.conns.WithLabelValues(k.service, k.port, k.endpoint),
		failures:   m.failures.WithLabelValues(k.service, k.port, k.endpoint),
		toEndpoint: m.bytes.WithLabelValues(k.service, k.port, k.endpoint, "to_endpoint"),
		toClient:   m.bytes.WithLabelValues(k.service, k.port, k.endpoint, "to_client"),
		active:     m.active.WithLabelValues(k.service, k.port, k.endpoint),
	}
}

// forBackend returns the series of k, a backend's label set, and counts
// one more user of them. Two backends can share a label set: an endpoint
// that left and came back while it drains, or a port name that changed
// protocol.
func (m *metrics) forBackend(k seriesKey) *backendMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.users[k]++
	return m.series(k)
}

// forPort is forBackend for a Service port's own series.
func (m *metrics) forPort(k seriesKey) prometheus.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.users[k]++
	return m.denied.WithLabelValues(k.service, k.port)
}

// release counts one user of k less and deletes its series with the last.
func (m *metrics) release(k seriesKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.users[k]--; m.users[k] > 0 {
		return
	}
	delete(m.users, k)
	if k.endpoint == "" {
		m.denied.DeleteLabelValues(k.service, k.port)
		return
	}
	m.conns.DeleteLabelValues(k.service, k.port, k.endpoint)
	m.failures.DeleteLabelValues(k.service, k.port, k.endpoint)
	m.active.DeleteLabelValues(k.service, k.port, k.endpoint)
	m.bytes.DeleteLabelValues(k.service, k.port, k.endpoint, "to_endpoint")
	m.bytes.DeleteLabelValues(k.service, k.port, k.endpoint, "to_client")
}
