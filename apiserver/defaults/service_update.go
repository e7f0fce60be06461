package defaults

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"portal.dev/portal/apiserver/svcconfig"
)

// ServiceTypeTransition clears, on update, the fields the new type no
// longer uses but that the client left as stored (and so were most likely
// allocated or defaulted, not asked for): cluster IPs and family fields when
// moving to ExternalName, nodePorts when leaving NodePort/LoadBalancer,
// healthCheckNodePort, allocateLoadBalancerNodePorts, loadBalancerClass and
// externalTrafficPolicy when they stop applying, and the load-balancer
// status. Values the client changed are kept for validation to judge. This
// is upstream's service strategy dropTypeDependentFields.
func ServiceTypeTransition(svc, old *corev1.Service) {
	if old == nil {
		return
	}
	if needsClusterIP(old) && !needsClusterIP(svc) {
		dropClusterIPFields(svc, old)
	}
	if needsNodePort(old) && !needsNodePort(svc) && sameNodePorts(old, svc) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	if needsHealthCheckNodePort(old) && !needsHealthCheckNodePort(svc) &&
		old.Spec.HealthCheckNodePort == svc.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		dropLoadBalancerFields(svc, old)
	}
	if externallyAccessible(old) && !externallyAccessible(svc) &&
		old.Spec.ExternalTrafficPolicy == svc.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	// Load-balancer teardown is asynchronous, but clients need not see that.
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
}

func dropClusterIPFields(svc, old *corev1.Service) {
	if slices.Equal(old.Spec.ClusterIPs, svc.Spec.ClusterIPs) {
		// The allocator releases these.
		svc.Spec.ClusterIP = ""
		svc.Spec.ClusterIPs = nil
	}
	if slices.Equal(old.Spec.IPFamilies, svc.Spec.IPFamilies) {
		svc.Spec.IPFamilies = nil
	}
	if samePtr(old.Spec.IPFamilyPolicy, svc.Spec.IPFamilyPolicy) {
		svc.Spec.IPFamilyPolicy = nil
	}
}

func dropLoadBalancerFields(svc, old *corev1.Service) {
	o, n := old.Spec.AllocateLoadBalancerNodePorts, svc.Spec.AllocateLoadBalancerNodePorts
	if o != nil && n != nil && *o == *n {
		svc.Spec.AllocateLoadBalancerNodePorts = nil
	}
	if samePtr(old.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) {
		svc.Spec.LoadBalancerClass = nil
	}
}

func sameNodePorts(a, b *corev1.Service) bool {
	if len(a.Spec.Ports) != len(b.Spec.Ports) {
		return false
	}
	for i := range a.Spec.Ports {
		if a.Spec.Ports[i].NodePort != b.Spec.Ports[i].NodePort {
			return false
		}
	}
	return true
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ServiceOnRead fills, on a Service read from storage, the fields objects
// written before they existed lack: clusterIPs from clusterIP, ipFamilies
// and ipFamilyPolicy from the cluster IPs (or, for headless services, from
// the cluster's primary family), and it drops the internalTrafficPolicy
// once wrongly defaulted on ExternalName services. It is upstream's
// registry decorator defaultOnReadService.
func ServiceOnRead(svc *corev1.Service, cfg ServiceConfig) {
	normalizeClusterIPs(svc, nil)
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		svc.Spec.InternalTrafficPolicy = nil
		return
	}
	if len(svc.Spec.IPFamilies) > 0 {
		return
	}
	single, dual := corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyRequireDualStack
	primary := cfg.PrimaryFamily()
	switch {
	case svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0:
		svc.Spec.IPFamilyPolicy = &dual
		svc.Spec.IPFamilies = []corev1.IPFamily{primary, svcconfig.OtherFamily(primary)}
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		svc.Spec.IPFamilyPolicy = &single
		svc.Spec.IPFamilies = []corev1.IPFamily{primary}
	default:
		for _, ip := range svc.Spec.ClusterIPs {
			svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, familyOfIP(ip))
		}
		switch len(svc.Spec.IPFamilies) {
		case 1:
			svc.Spec.IPFamilyPolicy = &single
		case 2:
			svc.Spec.IPFamilyPolicy = &dual
		}
	}
}
