package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"portal.dev/portal/controller/servicelb"
)

// Without --loadbalancer-ip-pools a LoadBalancer Service gets the node's
// address, and a client outside reaches it there through the proxy; a
// second Service on the same port waits, with a Warning naming the
// holder, until the port is free.
func TestLoadBalancerOnNodeAddress(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			pb := newProxyNet(t)
			pb.startServer("--proxy-mode", mode, "--cluster-cidr", "10.244.0.0/16", "--disable", "dns,agent,ingress")
			pb.backend("first-a", "first", "node1", 10, true)
			pb.backend("second-a", "second", "node1", 11, true)
			lb := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }
			pb.service("first", lb)
			waitIngress(t, pb, "first", nodeIP)
			if got := reachable(t, pb.client, "", hostPort(nodeIP, 80)); got != "first-a" {
				t.Errorf("node address on port 80 reached %s, want first-a", got)
			}

			pb.service("second", lb)
			eventually(t, "second Service pending on its port", func() (bool, string) {
				svc, err := pb.c.CoreV1().Services(pb.ns).Get(context.Background(), "second", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				c := meta.FindStatusCondition(svc.Status.Conditions, servicelb.ConditionAllocated)
				return c != nil && c.Reason == servicelb.ReasonPortInUse && len(svc.Status.LoadBalancer.Ingress) == 0,
					fmt.Sprintf("condition %+v, ingress %v", c, svc.Status.LoadBalancer.Ingress)
			})
			eventually(t, "Warning Event naming the port and its holder", func() (bool, string) {
				list, err := pb.c.CoreV1().Events(pb.ns).List(context.Background(),
					metav1.ListOptions{FieldSelector: "involvedObject.name=second"})
				if err != nil {
					return false, err.Error()
				}
				var msgs []string
				for _, e := range list.Items {
					msgs = append(msgs, e.Message)
					if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "port 80/TCP") &&
						strings.Contains(e.Message, "default/first") {
						return true, ""
					}
				}
				return false, fmt.Sprint(msgs)
			})

			if err := pb.c.CoreV1().Services(pb.ns).Delete(context.Background(), "first", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitIngress(t, pb, "second", nodeIP)
			eventually(t, "node address on port 80 reaches the second Service", func() (bool, string) {
				got, err := ask(pb.client, "", hostPort(nodeIP, 80))
				return got == "second-a", fmt.Sprint(got, err)
			})
		})
	}
}

// With the Ingress controller of `portal server` listening on the node's
// port 80, a LoadBalancer Service on port 80 used to get the node's
// address, and the proxy then sent node:80 to the Service instead of the
// Ingress controller. It now stays pending with a Warning naming the
// port and the Ingress controller, and node:80 still reaches the latter.
func TestLoadBalancerLeavesIngressPorts(t *testing.T) {
	pb := newProxyNet(t)
	pb.startServer("--proxy-mode", "nftables", "--cluster-cidr", "10.244.0.0/16", "--disable", "dns,agent")
	pb.backend("grab-a", "grab", "node1", 10, true)
	pb.service("grab", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	eventually(t, "Service on port 80 pending with a Warning naming the Ingress controller", func() (bool, string) {
		svc, err := pb.c.CoreV1().Services(pb.ns).Get(context.Background(), "grab", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(svc.Status.Conditions, servicelb.ConditionAllocated)
		if c == nil || c.Reason != servicelb.ReasonPortInUse || len(svc.Status.LoadBalancer.Ingress) > 0 {
			return false, fmt.Sprintf("condition %+v, ingress %v", c, svc.Status.LoadBalancer.Ingress)
		}
		list, err := pb.c.CoreV1().Events(pb.ns).List(context.Background(),
			metav1.ListOptions{FieldSelector: "involvedObject.name=grab"})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range list.Items {
			msgs = append(msgs, e.Message)
			if e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Message, "port 80/TCP in use on the nodes by the Ingress controller of portal server") {
				return true, ""
			}
		}
		return false, fmt.Sprint(msgs)
	})
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: pb.client.DialContext}}
	eventually(t, "node:80 answered by the Ingress controller", func() (bool, string) {
		resp, err := client.Get("http://" + hostPort(nodeIP, 80) + "/")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusNotFound && strings.Contains(string(b), "no Ingress rule matches"),
			fmt.Sprintf("%d %q", resp.StatusCode, b)
	})
}

// waitIngress waits until Service name shows exactly ip as its load
// balancer address.
func waitIngress(t *testing.T, pb *proxyBed, name, ip string) {
	t.Helper()
	eventually(t, name+" gets load balancer address "+ip, func() (bool, string) {
		svc, err := pb.c.CoreV1().Services(pb.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		in := svc.Status.LoadBalancer.Ingress
		return len(in) == 1 && in[0].IP == ip, fmt.Sprint(in)
	})
}
