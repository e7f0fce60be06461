package e2e

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestProxyUserspace holds what only the userspace mode promises: a
// backend that dies before the API knows costs clients nothing (the proxy
// retries the next endpoint), and the data path's counters are in
// /metrics.
func TestProxyUserspace(t *testing.T) {
	pb := newProxyBed(t, "userspace")
	const killed = "killed-b"
	var killBackend func()
	for i, name := range []string{"alive-a", killed} {
		ip := netip.AddrFrom4([4]byte{10, 244, 0, byte(60 + i)})
		pod := pb.bed.Pod(name, pb.node, "tb0", ip.String()+"/24", podGateway)
		b := pod.Serve(name, ip, 8080)
		pb.pods[name] = pod
		makePod(t, pb.c, pb.ns, podSpec{name: name, node: "node1", ip: ip.String(), labels: map[string]string{"app": "retry"}, ready: true})
		if name == killed {
			killBackend = b.Close
		}
	}
	svc := pb.service("retry", func(s *corev1.Service) {
		s.Annotations = map[string]string{"portal.dev/scheduler": "rr"}
	})
	vip := hostPort(svc.Spec.ClusterIP, 80)
	eventually(t, "both backends in rotation", func() (bool, string) {
		counts := spread(t, pb.node, "", vip, 10)
		return len(counts) == 2, fmt.Sprint(counts)
	})

	t.Run("a killed backend costs no failed connection", func(t *testing.T) {
		// The pod stays Ready in the API: only the proxy's retry saves
		// the clients that the scheduler sends to the dead one.
		killBackend()
		counts := spread(t, pb.node, "", vip, 50)
		if len(counts) != 1 || counts["alive-a"] != 50 {
			t.Errorf("after killing %s got %v, want all 50 connections answered by alive-a", killed, counts)
		}
	})

	t.Run("per-endpoint counters in /metrics", func(t *testing.T) {
		code, body := httpGet(pb.node, "http://127.0.0.1:10249/metrics")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", code, body)
		}
		for _, want := range []string{
			`portal_userspace_connections_total{endpoint="10.244.0.60:8080",port="tcp",service="default/retry"}`,
			`portal_userspace_connect_failures_total{endpoint="10.244.0.61:8080",port="tcp",service="default/retry"}`,
			`portal_userspace_bytes_total{direction="to_client",endpoint="10.244.0.60:8080",port="tcp",service="default/retry"}`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}
