package endpoints

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Builders for test objects. Pods are ready, running and on node-1 unless
// an option says otherwise.

func service(name string, opts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{
			Selector:   map[string]string{"app": name},
			ClusterIP:  "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func headless(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }

func publishNotReady(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }

func withoutSelector(s *corev1.Service) { s.Spec.Selector = nil }

func pod(name, app string, ips []string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{
			Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		}}},
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

func terminating(p *corev1.Pod) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	p.DeletionTimestamp = &now
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func hostname(host, subdomain string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = host, subdomain }
}

// render prints subsets compactly, so a failure shows got and want as
// lines that can be compared by eye:
// "[http:8080/TCP] ready=10.0.0.1(a@node-1) notReady=10.0.0.2(b@node-1)".
func render(subsets []corev1.EndpointSubset) string {
	var parts []string
	for _, s := range subsets {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
		}
		parts = append(parts, fmt.Sprintf("[%s] ready=%s notReady=%s",
			strings.Join(ports, ","), renderAddrs(s.Addresses), renderAddrs(s.NotReadyAddresses)))
	}
	return strings.Join(parts, " | ")
}

func renderAddrs(addrs []corev1.EndpointAddress) string {
	var out []string
	for _, a := range addrs {
		s := a.IP + "("
		if a.TargetRef != nil {
			s += a.TargetRef.Name
		}
		if a.NodeName != nil {
			s += "@" + *a.NodeName
		}
		if a.Hostname != "" {
			s += " host=" + a.Hostname
		}
		out = append(out, s+")")
	}
	return strings.Join(out, ",")
}
