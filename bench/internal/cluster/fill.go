package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Namespace holds the Services and Pods Fill creates.
const Namespace = "bench"

// Size is what Fill creates.
type Size struct {
	Services, PodsPerService, Nodes int
	// NodeAddresses gives node i the InternalIP 127.0.9.(i+1), where no
	// agent listens, and the kubelet port, so that a question to a node's
	// agent fails at once, as on a node whose agent is gone.
	NodeAddresses bool
}

// Fill creates Namespace, size.Nodes Ready nodes n0..nN-1, and size.Services
// Services s0..sN-1, each selecting size.PodsPerService Running, Ready
// Pods sI-0..sI-M-1 spread over the nodes, then waits for the controllers
// to put every Pod in an EndpointSlice as ready.
func Fill(ctx context.Context, c kubernetes.Interface, size Size) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range size.Nodes {
		if err := createNode(ctx, c, i, size.NodeAddresses); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range size.Services {
		g.Go(func() error { return createService(gctx, c, i, size) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return waitEndpoints(ctx, c, size.Services*size.PodsPerService)
}

func createNode(ctx context.Context, c kubernetes.Interface, i int, address bool) error {
	name := fmt.Sprintf("n%d", i)
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	now := metav1.Now()
	status := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "Bench", LastHeartbeatTime: now, LastTransitionTime: now}}}
	if address {
		status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("127.0.9.%d", i+1)}}
		status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	// A patch, not an update: the node controllers write the new node too
	// (its podCIDR).
	_, err = c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// createService creates Service i and its Pods, and writes the Pods'
// status as their agent would: Running, an address outside the Service
// range, Ready.
func createService(ctx context.Context, c kubernetes.Interface, i int, size Size) error {
	name := fmt.Sprintf("s%d", i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := c.CoreV1().Services(Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	for j := range size.PodsPerService {
		n := i*size.PodsPerService + j
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, j), Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", n%size.Nodes),
				Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"sleep"}}}}}
		p, err := c.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ip := fmt.Sprintf("10.%d.%d.%d", 128+n>>16, n>>8&255, n&255)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
		if _, err := c.CoreV1().Pods(Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitEndpoints waits until Namespace's slices hold want ready endpoints.
func waitEndpoints(ctx context.Context, c kubernetes.Interface, want int) error {
	const timeout = 10 * time.Minute
	deadline := time.Now().Add(timeout)
	got := 0
	for time.Now().Before(deadline) {
		l, err := c.DiscoveryV1().EndpointSlices(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got = 0
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					got++
				}
			}
		}
		if got >= want {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("endpoints: %d ready after %s, want %d", got, timeout, want)
}
