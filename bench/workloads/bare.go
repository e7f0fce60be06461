package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/bench/internal/host"
)

// bareRun is the reference for the scale run without the workload
// controllers: the bench itself creates n bare pods behind Service "bare"
// with 32 parallel clients, and the same steps are timed. What the scale
// run takes beyond this is the ReplicaSet and Deployment controllers'
// share; what this takes is the API server's, the scheduler's and the
// EndpointSlice controller's.
func bareRun(ctx context.Context, c kubernetes.Interface, pid, n int, anchorCPU time.Duration) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "bare"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := c.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	pods, err := observePods(ctx, c, "app=bare")
	if err != nil {
		return err
	}
	eps, err := observeSlices(ctx, c, "bare")
	if err != nil {
		return err
	}
	tmpl := deployment("bare", 0).Spec.Template
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	work, err := readEndpointWork(ctx, c)
	if err != nil {
		return err
	}
	cpu0, t0 := host.CPU(pid), time.Now()
	prof := startProfile(ctx, c, "bare")
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
				p.Name = fmt.Sprintf("bare-%d", i)
				if _, err := c.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	r, err := follow(ctx, pods, eps, pid, n, 5*time.Minute)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("bare pods: %w", err)
	default:
	}
	if err != nil {
		return err
	}
	r.report("bare", t0, cpu0, anchorCPU)
	reportEndpointWork(ctx, c, "bare", work)
	prof()
	// Their addresses go back to the nodes for the runs that follow.
	zero := int64(0)
	return c.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: "app=bare"})
}
