package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
)

// TestControllerManagerFailover: two controller-managers, one leads; when
// it is killed the other takes over within 15 s, and it does not rewrite
// slices that were already right.
func TestControllerManagerFailover(t *testing.T) {
	s := framework.StartServer(t, "--disable", "controllers")
	c := s.Client()
	ctx := context.Background()
	dir := t.TempDir()
	kc := s.UserKubeconfig(t, "system:kube-controller-manager", s.URL())
	procs := map[string]*framework.Process{}
	metrics := map[string]string{}
	for _, id := range []string{"cm-1", "cm-2"} {
		metrics[id] = fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t))
		procs[id] = framework.StartProcess(t, dir, "controller-manager", "--kubeconfig", kc, "--identity", id,
			"--node-monitor-grace-period", "1h", "--metrics-bind-address", metrics[id])
	}
	holder := func() string {
		lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "portal-controller-manager", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	eventually(t, "a leader", func() (bool, string) { h := holder(); return procs[h] != nil, h })
	leader := holder()

	makeNode(t, c, "n1", "zone-a") // pods on unknown nodes get no endpoints
	serve := func(name, ip string) {
		t.Helper()
		svc := service(name)
		if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		makePod(t, c, "default", podSpec{name: name + "-pod", node: "n1", ip: ip, labels: map[string]string{"app": name}, ready: true})
	}
	serve("before", "10.9.0.1")
	var rv string
	eventually(t, "slice from the first leader", func() (bool, string) {
		eps, sl := endpointsOf(t, c, "default", "before")
		if len(eps) == 1 {
			rv = sl[0].ResourceVersion
		}
		return len(eps) == 1, fmt.Sprint(len(eps))
	})

	// The leader's metrics show its controllers at work.
	eventually(t, "controller metrics", func() (bool, string) {
		resp, err := http.Get("http://" + metrics[leader] + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), "endpoint_slice_controller_changes") &&
			strings.Contains(string(body), "endpoint_slice_controller_sync_duration_seconds"), "metrics missing"
	})

	procs[leader].Kill()
	killed := time.Now()
	eventually(t, "a new leader", func() (bool, string) { h := holder(); return h != "" && h != leader, h })
	took := time.Since(killed)
	if took > 15*time.Second {
		t.Fatalf("failover took %v, want at most 15s", took)
	}
	t.Logf("failover took %v", took.Round(100*time.Millisecond))
	serve("after", "10.9.0.2")
	eventually(t, "slice from the new leader", func() (bool, string) {
		eps, _ := endpointsOf(t, c, "default", "after")
		return len(eps) == 1, fmt.Sprint(len(eps))
	})
	_, sl := endpointsOf(t, c, "default", "before")
	if len(sl) != 1 || sl[0].ResourceVersion != rv {
		t.Fatalf("the new leader rewrote an unchanged slice (resourceVersion %s -> %s)", rv, sl[0].ResourceVersion)
	}
}
