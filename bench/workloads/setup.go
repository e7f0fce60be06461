package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"portal.dev/portal/bench/internal/host"
)

// startNodes creates the namespace and n Ready nodes, waits for node IPAM
// to give each a pod CIDR, and starts an agent for each.
func startNodes(ctx context.Context, c kubernetes.Interface, n int, errs chan<- error) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return markReady(ctx, c, name, i) }); err != nil {
			return err
		}
		cidr, err := waitPodCIDR(ctx, c, name)
		if err != nil {
			return err
		}
		go newNodeAgent(c, name, cidr).run(ctx, 4, errs)
	}
	return nil
}

// markReady writes the node's status as its agent would on start.
func markReady(ctx context.Context, c kubernetes.Interface, name string, i int) error {
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.100.0.%d", i+1)}}
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

func waitPodCIDR(ctx context.Context, c kubernetes.Interface, node string) (netip.Prefix, error) {
	for range 300 {
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return netip.Prefix{}, err
		}
		if n.Spec.PodCIDR != "" {
			return netip.ParsePrefix(n.Spec.PodCIDR)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return netip.Prefix{}, fmt.Errorf("node %s got no pod CIDR from node IPAM", node)
}

// anchor creates *anchorN selector-less Services with 32 parallel clients
// and returns the server's CPU time per create.
func anchor(ctx context.Context, c kubernetes.Interface, pid int, run string) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	cpu0, t0 := host.CPU(pid), time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(*anchorN) {
					return
				}
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("anchor-%s-%d", run, i)},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
				if _, err := c.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took, cpu := time.Since(t0), host.CPU(pid)-cpu0
	select {
	case err := <-errs:
		return 0, fmt.Errorf("anchor: %w", err)
	default:
	}
	per := cpu / time.Duration(*anchorN)
	fmt.Printf("RESULT anchor-%s service_creates=%d took=%s creates_per_s=%.0f server_cpu_per_create=%s\n", run, *anchorN,
		took.Round(time.Millisecond), float64(*anchorN)/took.Seconds(), per.Round(time.Microsecond))
	return per, nil
}
