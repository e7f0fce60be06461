package endpointslice

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metricsSubsystem is upstream's subsystem name, so dashboards built for
// kube-controller-manager's endpoint_slice_controller_* series apply.
const metricsSubsystem = "endpoint_slice_controller"

// metrics are the controller's Prometheus collectors.
type metrics struct {
	syncDuration *prometheus.HistogramVec
	syncs        *prometheus.CounterVec
	changes      *prometheus.CounterVec
	desired      prometheus.Gauge
	queueDepth   prometheus.GaugeFunc

	mu              sync.Mutex
	desiredBySvc    map[string]int
	desiredTotalSum int
}

func newMetrics(queueLen func() int) *metrics {
	return &metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: metricsSubsystem,
			Name:      "sync_duration_seconds",
			Help:      "Time one Service sync took, by result (success, stale, error).",
			Buckets:   prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"result"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "syncs",
			Help:      "Number of EndpointSlice syncs, by result (success, stale, error).",
		}, []string{"result"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: metricsSubsystem,
			Name:      "changes",
			Help:      "Number of EndpointSlice changes, by operation (create, update, delete).",
		}, []string{"operation"}),
		desired: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem,
			Name:      "endpoints_desired",
			Help:      "Number of endpoints desired, over all Services.",
		}),
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Subsystem: metricsSubsystem,
			Name:      "queue_depth",
			Help:      "Number of Services waiting in the work queue.",
		}, func() float64 { return float64(queueLen()) }),
		desiredBySvc: map[string]int{},
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.syncDuration, m.syncs, m.changes, m.desired, m.queueDepth}
}

// setDesired records the endpoints one Service wants; n < 0 removes it.
func (m *metrics) setDesired(svcKey string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.desiredTotalSum -= m.desiredBySvc[svcKey]
	if n < 0 {
		delete(m.desiredBySvc, svcKey)
	} else {
		m.desiredBySvc[svcKey] = n
		m.desiredTotalSum += n
	}
	m.desired.Set(float64(m.desiredTotalSum))
}
