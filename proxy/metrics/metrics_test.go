package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNames pins the kube-proxy metric names dashboards look for.
func TestNames(t *testing.T) {
	m := New()
	m.SyncDuration.Observe(0.1)
	m.FullSyncDuration.Observe(0.1)
	m.PartialSyncDuration.Observe(0.01)
	m.NetworkProgrammingDuration.Observe(0.5)
	m.LastSyncTimestamp.SetToCurrentTime()
	m.SyncFailures.WithLabelValues("nftables").Inc()
	m.HealthzTotal.WithLabelValues("200").Inc()
	m.LivezTotal.WithLabelValues("200").Inc()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, name := range []string{
		"kubeproxy_sync_proxy_rules_duration_seconds_bucket",
		"kubeproxy_sync_full_proxy_rules_duration_seconds_count",
		"kubeproxy_sync_partial_proxy_rules_duration_seconds_count",
		"kubeproxy_network_programming_duration_seconds_bucket",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total",
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
		"kubeproxy_sync_proxy_rules_service_changes_total",
		"kubeproxy_sync_proxy_rules_service_changes_pending",
		"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
		"kubeproxy_conntrack_reconciler_deleted_entries_total",
		`kubeproxy_proxy_healthz_total{code="200"}`,
		`kubeproxy_proxy_livez_total{code="200"}`,
		`portal_proxy_sync_failures_total{mode="nftables"}`,
		"go_goroutines",
	} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
