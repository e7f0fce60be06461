package mirroring

import "github.com/prometheus/client_golang/prometheus"

// metricsSubsystem and the names of the duration and change metrics are
// upstream's, so dashboards built for kube-controller-manager work.
const metricsSubsystem = "endpoint_slice_mirroring_controller"

// metrics are the controller's Prometheus collectors.
type metrics struct {
	syncDuration     prometheus.Histogram
	queueDepth       prometheus.GaugeFunc
	changes          *prometheus.CounterVec
	addressesSkipped prometheus.Histogram
}

func newMetrics(queueLen func() int) *metrics {
	return &metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: metricsSubsystem,
			Name:      "endpoints_sync_duration",
			Help:      "Time in seconds to mirror one Endpoints into EndpointSlices.",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem,
			Name:      "queue_depth",
			Help:      "Endpoints waiting in the mirroring controller's queue.",
		}, func() float64 { return float64(queueLen()) }),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "changes",
			Help:      "EndpointSlice writes by operation (create, update, delete).",
		}, []string{"operation"}),
		addressesSkipped: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: metricsSubsystem,
			Name:      "addresses_skipped_per_sync",
			Help:      "Addresses not mirrored in one sync, for an invalid IP or over the per-subset maximum.",
			Buckets:   prometheus.ExponentialBuckets(2, 2, 15),
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.syncDuration, m.queueDepth, m.changes, m.addressesSkipped}
}
