package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withLabels(m metav1.ObjectMeta, labels map[string]string) metav1.ObjectMeta {
	m.Labels = labels
	return m
}

func TestNodeRows(t *testing.T) {
	info := corev1.NodeSystemInfo{
		KubeletVersion:          "v1.37.2",
		OSImage:                 "Debian GNU/Linux 13 (trixie)",
		KernelVersion:           "6.12.0",
		ContainerRuntimeVersion: "containerd://2.1.0",
	}
	cases := []rowCase{
		{
			name: "ready control plane",
			obj: &corev1.Node{
				ObjectMeta: withLabels(objectMeta("cp-1", 5*24*time.Hour), map[string]string{
					"node-role.kubernetes.io/control-plane": "",
					"node-role.kubernetes.io/etcd":          "",
					"node-role.kubernetes.io/":              "",
					"kubernetes.io/role":                    "control-plane",
					"kubernetes.io/hostname":                "cp-1",
				}),
				Status: corev1.NodeStatus{
					Conditions: []corev1.NodeCondition{
						{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
						{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
					},
					Addresses: []corev1.NodeAddress{
						{Type: corev1.NodeHostName, Address: "cp-1"},
						{Type: corev1.NodeInternalIP, Address: "192.168.1.10"},
						{Type: corev1.NodeInternalIP, Address: "fd00::10"},
						{Type: corev1.NodeExternalIP, Address: "203.0.113.10"},
					},
					NodeInfo: info,
				},
			},
			want: []any{"cp-1", "Ready", "control-plane,etcd", "5d", "v1.37.2", "192.168.1.10", "203.0.113.10", "Debian GNU/Linux 13 (trixie)", "6.12.0", "containerd://2.1.0"},
		},
		{
			name: "cordoned worker that stopped reporting",
			obj: &corev1.Node{
				ObjectMeta: objectMeta("worker-1", time.Hour),
				Spec:       corev1.NodeSpec{Unschedulable: true},
				Status: corev1.NodeStatus{
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}},
				},
			},
			want: []any{"worker-1", "NotReady,SchedulingDisabled", "<none>", "60m", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "new node without conditions",
			obj:  &corev1.Node{ObjectMeta: objectMeta("fresh", 10*time.Second)},
			want: []any{"fresh", "Unknown", "<none>", "10s", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
	}
	runRowCases(t, gr("", "nodes"), cases)
}
