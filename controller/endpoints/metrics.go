package endpoints

import "github.com/prometheus/client_golang/prometheus"

const metricsSubsystem = "endpoint_controller"

// metrics are the controller's Prometheus collectors.
type metrics struct {
	syncDuration prometheus.Histogram
	queueDepth   prometheus.GaugeFunc
	changes      *prometheus.CounterVec
}

func newMetrics(queueLen func() int) *metrics {
	return &metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: metricsSubsystem,
			Name:      "sync_duration_seconds",
			Help:      "Time to sync the Endpoints of one Service.",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem,
			Name:      "queue_depth",
			Help:      "Services waiting in the endpoint controller's queue.",
		}, func() float64 { return float64(queueLen()) }),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "changes_total",
			Help:      "Endpoints writes by operation (create, update, delete).",
		}, []string{"operation"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.syncDuration, m.queueDepth, m.changes}
}
