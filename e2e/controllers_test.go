package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
)

// podSpec describes a test pod: Portal runs no containers here, so the
// test writes the status a node agent would.
type podSpec struct {
	name, node, ip string
	labels         map[string]string
	ready          bool
	ports          []corev1.ContainerPort
	hostname       string
	subdomain      string
}

func makePod(t *testing.T, c kubernetes.Interface, ns string, p podSpec) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: p.labels},
		Spec: corev1.PodSpec{NodeName: p.node, Hostname: p.hostname, Subdomain: p.subdomain,
			Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"sleep"}, Ports: p.ports}}},
	}
	created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.name, err)
	}
	setPodStatus(t, c, created, p.ip, p.ready)
	return created
}

func setPodStatus(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	cur, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	cur.Status.Phase = corev1.PodRunning
	cur.Status.PodIP = ip
	cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s status: %v", pod.Name, err)
	}
}

func makeNode(t *testing.T, c kubernetes.Interface, name, zone string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}}}
	if _, err := c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// endpointsOf returns the endpoints of a Service's slices managed by the
// EndpointSlice controller: address -> endpoint, and how many slices.
func endpointsOf(t *testing.T, c kubernetes.Interface, ns, svc string) (map[string]discoveryv1.Endpoint, []discoveryv1.EndpointSlice) {
	t.Helper()
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: "kubernetes.io/service-name=" + svc + ",endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]discoveryv1.Endpoint{}
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			out[ep.Addresses[0]] = ep
		}
	}
	return out, list.Items
}

func TestEndpointSliceScenarios(t *testing.T) {
	// The test's nodes renew no Lease; keep node lifecycle from marking
	// their pods not ready halfway through.
	s := framework.StartServer(t, "--node-monitor-grace-period", "1h")
	c := s.Client()
	ctx := context.Background()
	ns := "scen"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makeNode(t, c, "node-a", "zone-a")
	makeNode(t, c, "node-b", "zone-b")

	t.Run("named targetPort resolves to two port sets", func(t *testing.T) {
		svc := service("named")
		svc.Spec.Selector = map[string]string{"app": "named"}
		svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i, port := range []int32{8080, 8080, 9090} {
			makePod(t, c, ns, podSpec{name: fmt.Sprintf("named-%d", i), node: "node-a", ip: fmt.Sprintf("10.1.0.%d", i+1),
				labels: map[string]string{"app": "named"}, ready: true,
				ports: []corev1.ContainerPort{{Name: "web", ContainerPort: port}}})
		}
		eventually(t, "two slices by port", func() (bool, string) {
			eps, slices := endpointsOf(t, c, ns, "named")
			ports := map[int32]int{}
			for _, sl := range slices {
				if len(sl.Ports) == 1 && sl.Ports[0].Port != nil {
					ports[*sl.Ports[0].Port] += len(sl.Endpoints)
				}
			}
			return len(eps) == 3 && ports[8080] == 2 && ports[9090] == 1, fmt.Sprintf("got %d endpoints, per port %v", len(eps), ports)
		})
	})

	t.Run("conditions zone hostname and publishNotReadyAddresses", func(t *testing.T) {
		svc := service("cond")
		svc.Spec.Selector = map[string]string{"app": "cond"}
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		makePod(t, c, ns, podSpec{name: "ready", node: "node-a", ip: "10.2.0.1", labels: map[string]string{"app": "cond"}, ready: true,
			hostname: "host-1", subdomain: "cond"})
		makePod(t, c, ns, podSpec{name: "notready", node: "node-b", ip: "10.2.0.2", labels: map[string]string{"app": "cond"}, ready: false})
		term := makePod(t, c, ns, podSpec{name: "terminating", node: "node-b", ip: "10.2.0.3", labels: map[string]string{"app": "cond"}, ready: true})
		// Bound to a node, the pod stays Terminating until its agent
		// confirms; none runs here, so it stays.
		if err := c.CoreV1().Pods(ns).Delete(ctx, term.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		type cond struct{ ready, serving, terminating bool }
		want := map[string]cond{"10.2.0.1": {true, true, false}, "10.2.0.2": {false, false, false}, "10.2.0.3": {false, true, true}}
		eventually(t, "conditions", func() (bool, string) {
			eps, _ := endpointsOf(t, c, ns, "cond")
			for ip, w := range want {
				ep, ok := eps[ip]
				if !ok {
					return false, "missing " + ip
				}
				got := cond{ptr.Deref(ep.Conditions.Ready, false), ptr.Deref(ep.Conditions.Serving, false), ptr.Deref(ep.Conditions.Terminating, false)}
				if got != w {
					return false, fmt.Sprintf("%s: got %+v, want %+v", ip, got, w)
				}
			}
			ep := eps["10.2.0.1"]
			if ptr.Deref(ep.Zone, "") != "zone-a" || ptr.Deref(ep.NodeName, "") != "node-a" || ptr.Deref(ep.Hostname, "") != "host-1" {
				return false, fmt.Sprintf("ready endpoint: zone %v node %v hostname %v", ep.Zone, ep.NodeName, ep.Hostname)
			}
			if ep.TargetRef == nil || ep.TargetRef.Name != "ready" {
				return false, fmt.Sprintf("targetRef %+v", ep.TargetRef)
			}
			return true, ""
		})
		// Legacy Endpoints: the ready pod in addresses, the not-ready one
		// in notReadyAddresses, the terminating one in neither.
		eventually(t, "legacy Endpoints", func() (bool, string) {
			e, err := c.CoreV1().Endpoints(ns).Get(ctx, "cond", metav1.GetOptions{})
			if err != nil || len(e.Subsets) != 1 {
				return false, fmt.Sprintf("%v %v", e, err)
			}
			var ready, notReady []string
			for _, a := range e.Subsets[0].Addresses {
				ready = append(ready, a.IP)
			}
			for _, a := range e.Subsets[0].NotReadyAddresses {
				notReady = append(notReady, a.IP)
			}
			return slices.Equal(ready, []string{"10.2.0.1"}) && slices.Equal(notReady, []string{"10.2.0.2"}),
				fmt.Sprintf("addresses %v notReady %v", ready, notReady)
		})
		// publishNotReadyAddresses makes every endpoint ready.
		patch := []byte(`{"spec":{"publishNotReadyAddresses":true}}`)
		if _, err := c.CoreV1().Services(ns).Patch(ctx, "cond", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "publishNotReadyAddresses", func() (bool, string) {
			eps, _ := endpointsOf(t, c, ns, "cond")
			for ip, ep := range eps {
				if !ptr.Deref(ep.Conditions.Ready, false) {
					return false, ip + " not ready"
				}
			}
			return len(eps) == 3, fmt.Sprintf("%d endpoints", len(eps))
		})
	})

	t.Run("150 pods in two slices, one flip rewrites one slice", func(t *testing.T) {
		svc := service("many")
		svc.Spec.Selector = map[string]string{"app": "many"}
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var pods []*corev1.Pod
		for i := range 150 {
			pods = append(pods, makePod(t, c, ns, podSpec{name: fmt.Sprintf("many-%d", i), node: "node-a",
				ip: fmt.Sprintf("10.3.%d.%d", i/200, i%200+1), labels: map[string]string{"app": "many"}, ready: true}))
		}
		var before []discoveryv1.EndpointSlice
		eventually(t, "150 endpoints in 2 slices", func() (bool, string) {
			eps, sl := endpointsOf(t, c, ns, "many")
			before = sl
			sizes := []int{}
			for _, s := range sl {
				sizes = append(sizes, len(s.Endpoints))
			}
			sort.Ints(sizes)
			// How the 150 split depends on how the pod events were batched
			// ([50 100] when each was synced alone, [57 93] when 57 came
			// first); two slices hold them either way.
			return len(eps) == 150 && len(sizes) == 2 && sizes[1] <= 100, fmt.Sprintf("%d endpoints, slice sizes %v", len(eps), sizes)
		})
		ip := "10.3.0.8"
		setPodStatus(t, c, pods[7], ip, false)
		eventually(t, "flip seen", func() (bool, string) {
			eps, _ := endpointsOf(t, c, ns, "many")
			ep, ok := eps[ip]
			return ok && !ptr.Deref(ep.Conditions.Ready, true), fmt.Sprintf("present %v, %+v", ok, ep.Conditions)
		})
		_, after := endpointsOf(t, c, ns, "many")
		changed := 0
		for _, b := range before {
			for _, a := range after {
				if a.Name == b.Name && a.ResourceVersion != b.ResourceVersion {
					changed++
				}
			}
		}
		if changed != 1 || len(after) != 2 {
			t.Fatalf("a readiness flip rewrote %d slices (now %d slices), want 1 of 2", changed, len(after))
		}
		// Deleting an unbound... a bound pod goes terminating; force it.
		if err := c.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "deleted pod leaves", func() (bool, string) {
			eps, _ := endpointsOf(t, c, ns, "many")
			_, has := eps["10.3.0.1"]
			return !has && len(eps) == 149, fmt.Sprintf("%d endpoints", len(eps))
		})
	})

	t.Run("deleting a Service removes its slices", func(t *testing.T) {
		if err := c.CoreV1().Services(ns).Delete(ctx, "named", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "slices garbage-collected", func() (bool, string) {
			_, sl := endpointsOf(t, c, ns, "named")
			_, err := c.CoreV1().Endpoints(ns).Get(ctx, "named", metav1.GetOptions{})
			return len(sl) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d slices left, endpoints err %v", len(sl), err)
		})
	})
}

func TestEndpointSliceMirroring(t *testing.T) {
	s := framework.StartServer(t)
	c := s.Client()
	ctx := context.Background()
	svc := service("external-db")
	svc.Spec.Selector = nil
	if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "external-db"},
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "192.0.2.10"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "192.0.2.11"}},
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 5432, Protocol: corev1.ProtocolTCP}},
		}}}
	if _, err := c.CoreV1().Endpoints("default").Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mirrored := func() []discoveryv1.EndpointSlice {
		list, err := c.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{
			LabelSelector: "kubernetes.io/service-name=external-db,endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io"})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	eventually(t, "mirrored slice", func() (bool, string) {
		sl := mirrored()
		if len(sl) != 1 || len(sl[0].Endpoints) != 2 {
			return false, fmt.Sprintf("%d slices", len(sl))
		}
		ready := map[string]bool{}
		for _, e := range sl[0].Endpoints {
			ready[e.Addresses[0]] = ptr.Deref(e.Conditions.Ready, false)
		}
		return ready["192.0.2.10"] && !ready["192.0.2.11"] && *sl[0].Ports[0].Port == 5432, fmt.Sprintf("%v", ready)
	})
	// skip-mirror removes the mirrored slices.
	patch := []byte(`{"metadata":{"labels":{"endpointslice.kubernetes.io/skip-mirror":"true"}}}`)
	if _, err := c.CoreV1().Endpoints("default").Patch(ctx, "external-db", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "skip-mirror", func() (bool, string) { n := len(mirrored()); return n == 0, fmt.Sprint(n, " slices") })
}

func TestLoadBalancerIPPool(t *testing.T) {
	s := framework.StartServer(t, "--loadbalancer-ip-pools", "192.0.2.10-192.0.2.11")
	c := s.Client()
	ctx := context.Background()
	lb := func(name string) *corev1.Service {
		svc := service(name)
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		return svc
	}
	ingressIP := func(name string) string {
		svc, err := c.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return svc.Status.LoadBalancer.Ingress[0].IP
	}
	requested := lb("wants-11")
	requested.Spec.LoadBalancerIP = "192.0.2.11"
	for _, svc := range []*corev1.Service{requested, lb("any")} {
		if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "pool IPs", func() (bool, string) {
		a, b := ingressIP("wants-11"), ingressIP("any")
		return a == "192.0.2.11" && b == "192.0.2.10", fmt.Sprintf("wants-11=%q any=%q", a, b)
	})
	// The pool is exhausted: the next one stays pending with an Event.
	if _, err := c.CoreV1().Services("default").Create(ctx, lb("pending"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "exhausted pool event", func() (bool, string) {
		out, err := s.Kubectl("get", "events", "--field-selector", "involvedObject.name=pending", "-o", "jsonpath={.items[*].reason}")
		return err == nil && strings.Contains(out, "AllocationFailed") && ingressIP("pending") == "", out
	})
	// Deleting one frees its IP for the pending Service.
	if err := c.CoreV1().Services("default").Delete(ctx, "any", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "freed IP reused", func() (bool, string) { ip := ingressIP("pending"); return ip == "192.0.2.10", ip })
	// Another class is left alone.
	other := lb("other-class")
	other.Spec.LoadBalancerClass = ptr.To("example.com/other")
	if _, err := c.CoreV1().Services("default").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if ip := ingressIP("other-class"); ip != "" {
		t.Fatalf("service of another loadBalancerClass got %s", ip)
	}
}
