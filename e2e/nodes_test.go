package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
)

func readyNode(t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}},
	}
	if _, err := c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestScheduler: pods without a node are bound to a Ready node that
// matches their nodeSelector, the least loaded first; a pod no node fits
// gets FailedScheduling.
func TestScheduler(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client()
	ctx := context.Background()
	readyNode(t, c, "big", map[string]string{"disk": "ssd"})
	readyNode(t, c, "small", nil)
	pods := c.CoreV1().Pods("default")
	for i := range 4 {
		if _, err := pods.Create(ctx, pod(fmt.Sprintf("spread-%d", i), ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "pods spread over both nodes", func() (bool, string) {
		list, _ := pods.List(ctx, metav1.ListOptions{})
		per := map[string]int{}
		for _, p := range list.Items {
			per[p.Spec.NodeName]++
		}
		return per["big"] == 2 && per["small"] == 2, fmt.Sprint(per)
	})
	ssd := pod("wants-ssd", "")
	ssd.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	nowhere := pod("wants-gpu", "")
	nowhere.Spec.NodeSelector = map[string]string{"gpu": "yes"}
	for _, p := range []*corev1.Pod{ssd, nowhere} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "nodeSelector honoured", func() (bool, string) {
		p, _ := pods.Get(ctx, "wants-ssd", metav1.GetOptions{})
		return p.Spec.NodeName == "big", p.Spec.NodeName
	})
	eventually(t, "FailedScheduling", func() (bool, string) {
		out, err := s.Kubectl("get", "events", "--field-selector", "involvedObject.name=wants-gpu", "-o", "jsonpath={.items[*].reason}")
		return err == nil && strings.Contains(out, "FailedScheduling"), out
	})
}

// TestNodeLifecycle: a node whose Lease stops being renewed goes Unknown
// and its pods' endpoints leave the rotation.
func TestNodeLifecycle(t *testing.T) {
	s := framework.StartServer(t, "--node-monitor-grace-period", "3s")
	c := s.Client()
	ctx := context.Background()
	readyNode(t, c, "n1", nil)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To(int32(40)),
			RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if _, err := c.CoordinationV1().Leases("kube-node-lease").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Services("default").Create(ctx, service("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makePod(t, c, "default", podSpec{name: "web-1", node: "n1", ip: "10.7.0.1", labels: map[string]string{"app": "web"}, ready: true})
	eventually(t, "endpoint ready", func() (bool, string) {
		eps, _ := endpointsOf(t, c, "default", "web")
		return ptr.Deref(eps["10.7.0.1"].Conditions.Ready, false), fmt.Sprint(eps)
	})
	// The lease is not renewed any more: after the grace period the node
	// is Unknown and the endpoint not ready.
	eventually(t, "node Unknown and endpoint out of rotation", func() (bool, string) {
		node, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var ready corev1.ConditionStatus
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = cond.Status
			}
		}
		eps, _ := endpointsOf(t, c, "default", "web")
		ep, ok := eps["10.7.0.1"]
		return ready == corev1.ConditionUnknown && ok && !ptr.Deref(ep.Conditions.Ready, true),
			fmt.Sprintf("node Ready %s, endpoint %+v", ready, ep.Conditions)
	})
}

// TestNodeIPAM: the controller manager gives every Node its own podCIDR
// from --cluster-cidr, keeps one a node already has, and reuses a deleted
// node's range only after it is released.
func TestNodeIPAM(t *testing.T) {
	s := framework.StartServer(t, "--cluster-cidr", "10.250.0.0/22", "--node-monitor-grace-period", "1h")
	c := s.Client()
	ctx := context.Background()
	preset := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "preset"}, Spec: corev1.NodeSpec{
		PodCIDR: "10.250.2.0/24", PodCIDRs: []string{"10.250.2.0/24"}}}
	if _, err := c.CoreV1().Nodes().Create(ctx, preset, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		readyNode(t, c, n, nil)
	}
	eventually(t, "every node has its own podCIDR", func() (bool, string) {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]string{}
		for _, n := range list.Items {
			if n.Spec.PodCIDR == "" || !strings.HasPrefix(n.Spec.PodCIDR, "10.250.") || !strings.HasSuffix(n.Spec.PodCIDR, "/24") {
				return false, fmt.Sprintf("node %s: podCIDR %q", n.Name, n.Spec.PodCIDR)
			}
			if other, dup := seen[n.Spec.PodCIDR]; dup {
				return false, fmt.Sprintf("nodes %s and %s share %s", other, n.Name, n.Spec.PodCIDR)
			}
			seen[n.Spec.PodCIDR] = n.Name
		}
		return seen["10.250.2.0/24"] == "preset" && len(seen) == 4, fmt.Sprint(seen)
	})
	// The /22 holds four /24s, all taken: a fifth node waits until one is freed.
	readyNode(t, c, "d", nil)
	time.Sleep(time.Second)
	if n, _ := c.CoreV1().Nodes().Get(ctx, "d", metav1.GetOptions{}); n.Spec.PodCIDR != "" {
		t.Fatalf("node d got %s from a full range", n.Spec.PodCIDR)
	}
	if err := c.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node d gets the range node a released", func() (bool, string) {
		n, err := c.CoreV1().Nodes().Get(ctx, "d", metav1.GetOptions{})
		return err == nil && n.Spec.PodCIDR != "", fmt.Sprint(err)
	})
}
