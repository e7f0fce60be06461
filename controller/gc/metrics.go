package gc

import "github.com/prometheus/client_golang/prometheus"

// metricsSubsystem prefixes the collector's series.
const metricsSubsystem = "garbage_collector"

// metrics are one Collector's Prometheus collectors.
type metrics struct {
	deletions  prometheus.Counter
	orphanings prometheus.Counter
	queueDepth prometheus.GaugeFunc
}

func newMetrics(queueLen func() int) *metrics {
	return &metrics{
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "deletions_total",
			Help:      "Dependents the garbage collector deleted.",
		}),
		orphanings: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "orphanings_total",
			Help:      "Owner references removed from dependents of owners deleted with propagationPolicy Orphan.",
		}),
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem,
			Name:      "queue_depth",
			Help:      "Objects waiting in the garbage collector's work queue.",
		}, func() float64 { return float64(queueLen()) }),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deletions, m.orphanings, m.queueDepth}
}
