package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/e2e/framework"
)

// TestControllerManagerRegainsLeadershipCleanly pins issue 23: a
// controller manager that lost its Lease and won it back logged
// "duplicate metrics collector registration", its controllers' metrics
// registered again while the last term's still were.
func TestControllerManagerRegainsLeadershipCleanly(t *testing.T) {
	s := framework.StartServer(t, "--disable", "controllers")
	c := s.Client()
	ctx := t.Context()
	dir := t.TempDir()
	kc := s.UserKubeconfig(t, "system:kube-controller-manager", s.URL())
	cm := framework.StartProcess(t, dir, "controller-manager", "--kubeconfig", kc, "--identity", "cm",
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms",
		"--node-monitor-grace-period", "1h", "--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", framework.FreePort(t)))
	terms := func() int {
		data, _ := os.ReadFile(cm.Log)
		return strings.Count(string(data), "Controllers running")
	}
	eventuallyWithin(t, 60*time.Second, "the first term's controllers", func() (bool, string) {
		return terms() == 1, fmt.Sprintf("%d terms", terms())
	})

	// Another holder takes the Lease and never renews it: the manager
	// steps down, and takes the Lease back once it expires.
	lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "portal-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	thief, now := "thief", metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime = &thief, &now, &now
	if _, err := c.CoordinationV1().Leases("kube-system").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, 60*time.Second, "the second term's controllers", func() (bool, string) {
		return terms() == 2, fmt.Sprintf("%d terms", terms())
	})
	data, err := os.ReadFile(cm.Log)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "duplicate metrics collector registration") || strings.Contains(line, "Registering controller metric") {
			t.Errorf("after regaining leadership: %s", line)
		}
	}
}
