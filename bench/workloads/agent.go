package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// nodeAgent stands in for one node's `portal agent`: it watches the pods
// bound to its node and, as an agent would once their containers ran,
// writes them Running and Ready with an address from the node's pod CIDR.
// It finishes graceful deletions at once (a grace period of 0, as an agent
// does once the containers are gone), so a bound pod's delete completes.
type nodeAgent struct {
	client kubernetes.Interface
	node   string

	mu    sync.Mutex
	cidr  netip.Prefix
	inUse map[netip.Addr]bool
}

func newNodeAgent(c kubernetes.Interface, node string, cidr netip.Prefix) *nodeAgent {
	return &nodeAgent{client: c, node: node, cidr: cidr.Masked(), inUse: map[netip.Addr]bool{}}
}

// addr hands out a free address of the node's pod CIDR; the first is left
// to the node's bridge and the last is the broadcast, as on a real node.
func (a *nodeAgent) addr() (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ip := a.cidr.Addr().Next().Next(); a.cidr.Contains(ip.Next()); ip = ip.Next() {
		if !a.inUse[ip] {
			a.inUse[ip] = true
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node %s: pod CIDR %s exhausted", a.node, a.cidr)
}

// release frees the address of a pod that is gone.
func (a *nodeAgent) release(p *corev1.Pod) {
	if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
		a.mu.Lock()
		delete(a.inUse, ip)
		a.mu.Unlock()
	}
}

// run follows the node's pods until ctx ends, with workers writing status
// in parallel, as an agent starts several pods at once. An informer, as
// the agent has, so that a watch the server closes is resumed.
func (a *nodeAgent) run(ctx context.Context, workers int, errs chan<- error) {
	work := make(chan *corev1.Pod, 4096)
	for range workers {
		go func() {
			for {
				select {
				case p := <-work:
					if err := a.handle(ctx, p); err != nil && ctx.Err() == nil {
						select {
						case errs <- err:
						default:
						}
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	started := map[types.UID]bool{} // pods whose start was handed to a worker
	f := informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + a.node }))
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		start := p.DeletionTimestamp == nil && p.Status.PodIP == "" && !started[p.UID]
		started[p.UID] = started[p.UID] || start
		mu.Unlock()
		if start || p.DeletionTimestamp != nil {
			work <- p
		}
	}
	f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				mu.Lock()
				delete(started, p.UID)
				mu.Unlock()
				a.release(p)
			}
		},
	})
	f.Start(ctx.Done())
}

// handle starts a pod (writes its status) or finishes its deletion.
func (a *nodeAgent) handle(ctx context.Context, p *corev1.Pod) error {
	pods := a.client.CoreV1().Pods(namespace)
	if p.DeletionTimestamp != nil {
		zero := int64(0)
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	ip, err := a.addr()
	if err != nil {
		return err
	}
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip.String(), []corev1.PodIP{{IP: ip.String()}}
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Ready: true,
		Image: p.Spec.Containers[0].Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Deleted meanwhile, or changed (the scheduler's condition
		// write): the watch brings the new version or the deletion.
		return a.retry(ctx, p, err)
	}
	return err
}

// retry writes the status again over the pod's current version after a
// conflict; a pod that is gone needs nothing.
func (a *nodeAgent) retry(ctx context.Context, want *corev1.Pod, cause error) error {
	if apierrors.IsNotFound(cause) {
		return nil
	}
	for range 5 {
		cur, err := a.client.CoreV1().Pods(namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.UID != want.UID || cur.DeletionTimestamp != nil {
			return nil
		}
		cur.Status = want.Status
		_, err = a.client.CoreV1().Pods(namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("pod %s: status write kept conflicting", want.Name)
}
