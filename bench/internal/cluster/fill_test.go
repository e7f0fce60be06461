package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestCreateNode: the nodes Fill makes are Ready, and with NodeAddresses
// have an InternalIP and a kubelet port where no agent answers.
func TestCreateNode(t *testing.T) {
	tests := []struct {
		name        string
		addresses   bool
		wantAddress string
		wantPort    int32
	}{
		{name: "without addresses", addresses: false},
		{name: "with addresses", addresses: true, wantAddress: "127.0.9.3", wantPort: 10250},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			if err := createNode(t.Context(), c, 2, tc.addresses); err != nil {
				t.Fatal(err)
			}
			n, err := c.CoreV1().Nodes().Get(t.Context(), "n2", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !ready(n) {
				t.Errorf("got conditions %v, want Ready", n.Status.Conditions)
			}
			address := ""
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					address = a.Address
				}
			}
			if address != tc.wantAddress || n.Status.DaemonEndpoints.KubeletEndpoint.Port != tc.wantPort {
				t.Errorf("got InternalIP %q, kubelet port %d; want %q, %d", address, n.Status.DaemonEndpoints.KubeletEndpoint.Port, tc.wantAddress, tc.wantPort)
			}
		})
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
