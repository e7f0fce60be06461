package endpoints

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "endpoint_controller"

// The controller's metrics live in the process-wide legacyregistry (served
// by legacyregistry.Handler()), registered once when the first controller
// is built.
var (
	syncDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "sync_duration_seconds",
		Help:           "Time to sync the Endpoints of one Service.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})
	queueDepth = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "queue_depth",
		Help:           "Services waiting in the endpoint controller's queue.",
		StabilityLevel: metrics.ALPHA,
	})
	changes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "changes_total",
		Help:           "Endpoints writes by operation (create, update, delete).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncDuration, queueDepth, changes)
	})
}
