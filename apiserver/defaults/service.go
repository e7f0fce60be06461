package defaults

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Service applies upstream's SetDefaults_Service: type ClusterIP, port
// protocol TCP and targetPort = port, sessionAffinity None (ClientIP gets a
// 10800s timeout; None drops the config), externalTrafficPolicy Cluster for
// externally reachable services, internalTrafficPolicy Cluster for types
// that get a cluster IP, allocateLoadBalancerNodePorts true and ingress
// ipMode VIP for LoadBalancers.
//
// cfg is unused: upstream's static defaults do not depend on cluster
// configuration (the family fields do, see ServiceIPFamilies). It is taken so
// callers need not change if that stops being true.
func Service(svc *corev1.Service, cfg ServiceConfig) {
	_ = cfg
	spec := &svc.Spec
	defaultSessionAffinity(spec)
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		defaultServicePort(&spec.Ports[i])
	}
	if externallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil && getsClusterIP(svc.Spec.Type) {
		p := corev1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &p
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		defaultLoadBalancer(svc)
	}
}

func defaultSessionAffinity(spec *corev1.ServiceSpec) {
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		c := spec.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			timeout := corev1.DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout},
			}
		}
	}
}

func defaultServicePort(sp *corev1.ServicePort) {
	if sp.Protocol == "" {
		sp.Protocol = corev1.ProtocolTCP
	}
	if sp.TargetPort == intstr.FromInt32(0) || sp.TargetPort == intstr.FromString("") {
		sp.TargetPort = intstr.FromInt32(sp.Port)
	}
}

func defaultLoadBalancer(svc *corev1.Service) {
	if svc.Spec.AllocateLoadBalancerNodePorts == nil {
		allocate := true
		svc.Spec.AllocateLoadBalancerNodePorts = &allocate
	}
	for i := range svc.Status.LoadBalancer.Ingress {
		ing := &svc.Status.LoadBalancer.Ingress[i]
		if ing.IP != "" && ing.IPMode == nil {
			mode := corev1.LoadBalancerIPModeVIP
			ing.IPMode = &mode
		}
	}
}

// externallyAccessible is upstream's service.ExternallyAccessible:
// externalTrafficPolicy applies to NodePort and LoadBalancer services and to
// ClusterIP services with externalIPs.
func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// getsClusterIP reports whether t is one of the types that get a cluster IP
// (or "None").
func getsClusterIP(t corev1.ServiceType) bool {
	switch t {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return true
	}
	return false
}

// needsClusterIP is upstream's registry predicate, which counts every type
// but ExternalName (including unknown ones, which validation rejects).
func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName
}

func needsNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

func needsHealthCheckNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}
