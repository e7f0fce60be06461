package servicelb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Reasons of the ConditionAllocated condition.
const (
	// ReasonAllocated: the Service has its addresses (status True).
	ReasonAllocated = "Allocated"
	// ReasonPoolExhausted: no free address is left in a family's pools.
	ReasonPoolExhausted = "PoolExhausted"
	// ReasonIPInUse: a requested address belongs to another Service.
	ReasonIPInUse = "IPInUse"
	// ReasonNotInPool: a requested address is in no pool.
	ReasonNotInPool = "NotInPool"
	// ReasonNoPool: no pool serves any IP family of the Service.
	ReasonNoPool = "NoPool"
	// ReasonInvalidRequest: the requested addresses make no sense.
	ReasonInvalidRequest = "InvalidRequest"
	// ReasonPortInUse: without pools, another Service holds one of the
	// Service's ports on the nodes' addresses.
	ReasonPortInUse = "PortInUse"
	// ReasonNoNodeAddress: without pools, no usable node has an address
	// of the Service's families.
	ReasonNoNodeAddress = "NoNodeAddress"
)

// reconcile brings the Service with key k and the allocation in line.
func (c *Controller) reconcile(ctx context.Context, k string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		c.release(k)
		return nil
	case err != nil:
		return err
	case svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
		c.release(k)
		return c.clearStatus(ctx, svc)
	case !served(svc):
		c.release(k) // another implementation's Service: leave it alone
		return nil
	}
	return c.assign(ctx, svc)
}

// release frees the addresses (or node ports) of Service k and retries
// the Services that wait for one.
func (c *Controller) release(k string) {
	c.clearPending(k)
	if c.src.release(k) {
		c.wakePending()
	}
}

// assign allocates svc's addresses and writes them, with the condition,
// to its status. A Service that cannot have them keeps what it held (none
// for a new one; none, without pools, when a port is taken), is marked
// pending and gets a Warning Event.
func (c *Controller) assign(ctx context.Context, svc *corev1.Service) error {
	k := key(svc)
	before := c.src.assigned(k)
	ips, freed, err := c.src.assign(k, svc)
	cond := conditionFor(ips, err)
	c.tell(svc, before, ips, cond)
	if freed {
		c.wakePending()
	}
	return c.writeStatus(ctx, svc, ips, cond)
}

// tell records the outcome of an allocation: the pending mark, a Warning
// Event for a refusal with a new reason and a Normal Event for new
// addresses. It decides from memory, not from the informer's copy, which
// may not show the last status written yet.
func (c *Controller) tell(svc *corev1.Service, before, ips []netip.Addr, cond metav1.Condition) {
	k := key(svc)
	if cond.Status == metav1.ConditionFalse {
		if c.setPending(k, cond.Message) {
			c.recorder.Event(svc, corev1.EventTypeWarning, EventAllocationFailed, cond.Message)
		}
		return
	}
	c.clearPending(k)
	if !slices.Equal(before, ips) {
		c.recorder.Eventf(svc, corev1.EventTypeNormal, EventIPAllocated, "Assigned load balancer IPs %s", joinAddrs(ips))
	}
}

// conditionFor returns the ConditionAllocated condition for the outcome of
// an allocation.
func conditionFor(ips []netip.Addr, err error) metav1.Condition {
	if err == nil {
		return metav1.Condition{
			Type: ConditionAllocated, Status: metav1.ConditionTrue, Reason: ReasonAllocated,
			Message: "assigned " + joinAddrs(ips),
		}
	}
	reason := ReasonInvalidRequest
	switch {
	case errors.Is(err, ErrExhausted):
		reason = ReasonPoolExhausted
	case errors.Is(err, ErrInUse):
		reason = ReasonIPInUse
	case errors.Is(err, ErrNotInPool):
		reason = ReasonNotInPool
	case errors.Is(err, ErrNoPool):
		reason = ReasonNoPool
	case errors.Is(err, ErrPortInUse):
		reason = ReasonPortInUse
	case errors.Is(err, ErrNoNodeAddress):
		reason = ReasonNoNodeAddress
	}
	return metav1.Condition{
		Type: ConditionAllocated, Status: metav1.ConditionFalse, Reason: reason,
		Message: "cannot allocate load balancer IPs: " + err.Error(),
	}
}

// writeStatus sets svc's ingress to ips and its condition to cond, through
// the status subresource, when they differ from what it shows.
func (c *Controller) writeStatus(ctx context.Context, svc *corev1.Service, ips []netip.Addr, cond metav1.Condition) error {
	status := svc.Status.DeepCopy()
	status.LoadBalancer.Ingress = ingressFor(ips)
	cond.ObservedGeneration = svc.Generation
	meta.SetStatusCondition(&status.Conditions, cond)
	return c.updateStatus(ctx, svc, status)
}

// clearStatus takes the ingress and the condition off a Service that is no
// longer of type LoadBalancer.
func (c *Controller) clearStatus(ctx context.Context, svc *corev1.Service) error {
	status := svc.Status.DeepCopy()
	status.LoadBalancer.Ingress = nil
	meta.RemoveStatusCondition(&status.Conditions, ConditionAllocated)
	return c.updateStatus(ctx, svc, status)
}

func (c *Controller) updateStatus(ctx context.Context, svc *corev1.Service, status *corev1.ServiceStatus) error {
	if apiequality.Semantic.DeepEqual(*status, svc.Status) {
		return nil
	}
	cp := svc.DeepCopy()
	cp.Status = *status
	_, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil // gone: its delete event releases the addresses
	}
	if err != nil {
		return fmt.Errorf("update status of service %s: %w", key(svc), err)
	}
	return nil
}

// ingressFor returns the ingress entries for ips.
func ingressFor(ips []netip.Addr) []corev1.LoadBalancerIngress {
	if len(ips) == 0 {
		return nil
	}
	out := make([]corev1.LoadBalancerIngress, 0, len(ips))
	for _, ip := range ips {
		mode := corev1.LoadBalancerIPModeVIP
		out = append(out, corev1.LoadBalancerIngress{IP: ip.String(), IPMode: &mode})
	}
	return out
}

func findCondition(svc *corev1.Service) *metav1.Condition {
	return meta.FindStatusCondition(svc.Status.Conditions, ConditionAllocated)
}

func joinAddrs(ips []netip.Addr) string {
	parts := make([]string, 0, len(ips))
	for _, ip := range ips {
		parts = append(parts, ip.String())
	}
	return strings.Join(parts, ", ")
}
