package userspace

import "github.com/prometheus/client_golang/prometheus"

// metrics are the data path's counters, labelled by Service
// (namespace/name), port name and endpoint (ip:port); per-Service figures
// are their sums.
type metrics struct {
	conns    *prometheus.CounterVec
	active   *prometheus.GaugeVec
	bytes    *prometheus.CounterVec
	failures *prometheus.CounterVec
	denied   *prometheus.CounterVec
}

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

func (m *metrics) forBackend(labels []string) *backendMetrics {
	svc, port, ep := labels[0], labels[1], labels[2]
	return &backendMetrics{
		conns:      m.conns.WithLabelValues(svc, port, ep),
		failures:   m.failures.WithLabelValues(svc, port, ep),
		toEndpoint: m.bytes.WithLabelValues(svc, port, ep, "to_endpoint"),
		toClient:   m.bytes.WithLabelValues(svc, port, ep, "to_client"),
		active:     m.active.WithLabelValues(svc, port, ep),
	}
}
