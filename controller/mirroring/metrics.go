package mirroring

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricsSubsystem and the names of the duration and change metrics are
// upstream's, so dashboards built for kube-controller-manager work.
const metricsSubsystem = "endpoint_slice_mirroring_controller"

// The controller's metrics live in the process-wide legacyregistry (served
// by legacyregistry.Handler()), registered once when the first controller
// is built.
var (
	syncDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "endpoints_sync_duration",
		Help:           "Time in seconds to mirror one Endpoints into EndpointSlices.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})
	queueDepth = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "queue_depth",
		Help:           "Endpoints waiting in the mirroring controller's queue.",
		StabilityLevel: metrics.ALPHA,
	})
	changes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "changes",
		Help:           "EndpointSlice writes by operation (create, update, delete).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})
	addressesSkipped = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "addresses_skipped_per_sync",
		Help:           "Addresses not mirrored in one sync, for an invalid IP or over the per-subset maximum.",
		Buckets:        metrics.ExponentialBuckets(2, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncDuration, queueDepth, changes, addressesSkipped)
	})
}
