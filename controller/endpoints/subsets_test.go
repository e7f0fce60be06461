package endpoints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSubsets(t *testing.T) {
	v4 := func(ip string) []string { return []string{ip} }
	tests := []struct {
		name string
		svc  *corev1.Service
		pods []*corev1.Pod
		want string
	}{{
		name: "ready and not-ready pods",
		svc:  service("web"),
		pods: []*corev1.Pod{
			pod("b", "web", v4("10.0.0.2"), notReady),
			pod("a", "web", v4("10.0.0.1")),
		},
		want: "[http:8080/TCP] ready=10.0.0.1(a@node-1) notReady=10.0.0.2(b@node-1)",
	}, {
		name: "publishNotReadyAddresses puts every pod in addresses",
		svc:  service("web", publishNotReady),
		pods: []*corev1.Pod{
			pod("a", "web", v4("10.0.0.1")),
			pod("b", "web", v4("10.0.0.2"), notReady),
		},
		want: "[http:8080/TCP] ready=10.0.0.1(a@node-1),10.0.0.2(b@node-1) notReady=",
	}, {
		name: "terminal pods are excluded",
		svc:  service("web"),
		pods: []*corev1.Pod{
			pod("a", "web", v4("10.0.0.1")),
			pod("done", "web", v4("10.0.0.2"), phase(corev1.PodSucceeded)),
			pod("failed", "web", v4("10.0.0.3"), phase(corev1.PodFailed), notReady),
		},
		want: "[http:8080/TCP] ready=10.0.0.1(a@node-1) notReady=",
	}, {
		name: "terminal pods are excluded with publishNotReadyAddresses too",
		svc:  service("web", publishNotReady),
		pods: []*corev1.Pod{pod("failed", "web", v4("10.0.0.3"), phase(corev1.PodFailed))},
		want: "",
	}, {
		name: "terminating pods are excluded",
		svc:  service("web"),
		pods: []*corev1.Pod{
			pod("a", "web", v4("10.0.0.1")),
			pod("going", "web", v4("10.0.0.2"), terminating),
		},
		want: "[http:8080/TCP] ready=10.0.0.1(a@node-1) notReady=",
	}, {
		name: "terminating pods are kept with publishNotReadyAddresses",
		svc:  service("web", publishNotReady),
		pods: []*corev1.Pod{pod("going", "web", v4("10.0.0.2"), terminating, notReady)},
		want: "[http:8080/TCP] ready=10.0.0.2(going@node-1) notReady=",
	}, {
		name: "pods without an IP are excluded",
		svc:  service("web"),
		pods: []*corev1.Pod{pod("pending", "web", nil)},
		want: "",
	}, {
		name: "hostname is set when the subdomain names the service",
		svc:  service("db", headless),
		pods: []*corev1.Pod{
			pod("db-0", "db", v4("10.0.0.1"), hostname("db-0", "db")),
			pod("db-1", "db", v4("10.0.0.2"), hostname("db-1", "other")),
		},
		want: "[http:8080/TCP] ready=10.0.0.1(db-0@node-1 host=db-0),10.0.0.2(db-1@node-1) notReady=",
	}, {
		name: "headless service without ports lists pods without ports",
		svc: service("db", headless, func(s *corev1.Service) {
			s.Spec.Ports = nil
		}),
		pods: []*corev1.Pod{pod("db-0", "db", v4("10.0.0.1"))},
		want: "[] ready=10.0.0.1(db-0@node-1) notReady=",
	}, {
		name: "service with a cluster IP and no ports has no subsets",
		svc:  service("web", func(s *corev1.Service) { s.Spec.Ports = nil }),
		pods: []*corev1.Pod{pod("a", "web", v4("10.0.0.1"))},
		want: "",
	}, {
		name: "named target port resolves per pod; pods without it are left out of that port",
		svc: service("web", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{
				Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web"),
			})
		}),
		pods: []*corev1.Pod{
			pod("a", "web", v4("10.0.0.1")),
			pod("b", "web", v4("10.0.0.2"), func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil }),
		},
		want: "[http:8080/TCP] ready=10.0.0.1(a@node-1),10.0.0.2(b@node-1) notReady=" +
			" | [metrics:8080/TCP] ready=10.0.0.1(a@node-1) notReady=",
	}, {
		name: "IPv6 service takes the IPv6 address of a dual-stack pod",
		svc: service("web", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.IPFamilies = "fd00::10", []corev1.IPFamily{corev1.IPv6Protocol}
		}),
		pods: []*corev1.Pod{pod("a", "web", []string{"10.0.0.1", "fd00::1"})},
		want: "[http:8080/TCP] ready=fd00::1(a@node-1) notReady=",
	}, {
		name: "pods without an IP of the service family are left out",
		svc:  service("web"),
		pods: []*corev1.Pod{pod("a", "web", []string{"fd00::1"})},
		want: "",
	}, {
		name: "service without IP families falls back to its cluster IP's family",
		svc: service("web", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.IPFamilies = "fd00::10", nil
		}),
		pods: []*corev1.Pod{pod("a", "web", []string{"10.0.0.1", "fd00::1"})},
		want: "[http:8080/TCP] ready=fd00::1(a@node-1) notReady=",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(Subsets(tc.svc, tc.pods)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestSubsetsTargetRef(t *testing.T) {
	got := Subsets(service("web"), []*corev1.Pod{pod("a", "web", []string{"10.0.0.1"})})
	if len(got) != 1 || len(got[0].Addresses) != 1 {
		t.Fatalf("got %s, want one address", render(got))
	}
	ref := got[0].Addresses[0].TargetRef
	want := corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "a", UID: "uid-a"}
	if ref == nil || *ref != want {
		t.Errorf("got targetRef %+v, want %+v", ref, want)
	}
}

func TestShouldPodBeInEndpoints(t *testing.T) {
	tests := []struct {
		name               string
		pod                *corev1.Pod
		includeTerminating bool
		want               bool
	}{
		{"running", pod("a", "x", []string{"10.0.0.1"}), false, true},
		{"not ready", pod("a", "x", []string{"10.0.0.1"}, notReady), false, true},
		{"succeeded", pod("a", "x", []string{"10.0.0.1"}, phase(corev1.PodSucceeded)), true, false},
		{"failed", pod("a", "x", []string{"10.0.0.1"}, phase(corev1.PodFailed)), true, false},
		{"no IP", pod("a", "x", nil), false, false},
		{"terminating", pod("a", "x", []string{"10.0.0.1"}, terminating), false, false},
		{"terminating, included", pod("a", "x", []string{"10.0.0.1"}, terminating), true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShouldPodBeInEndpoints(tc.pod, tc.includeTerminating); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
