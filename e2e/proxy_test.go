package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// proxyModes are the data planes the black-box proxy suite runs against.
var proxyModes = []string{"nftables", "iptables", "userspace"}

// Addresses of the proxy test bed. One node, node1, runs `portal server`
// with the proxy; its pods sit on a bridge in 10.244.0.0/24. A client
// outside reaches the node over a veth from two addresses. node2 exists
// only as an API object: pods "on node2" are reachable over the same bridge
// but count as remote endpoints for the traffic policies.
const (
	nodeIP     = "10.100.0.1"
	clientIP   = "10.100.0.2"
	clientIP2  = "10.100.0.3"
	podGateway = "10.244.0.1"
	lbPool     = "10.200.0.0/24"
	externalIP = "10.150.0.1"
)

type proxyBed struct {
	t      *testing.T
	bed    *testbed.Bed
	node   *testbed.NS
	client *testbed.NS
	server *framework.Server
	c      kubernetes.Interface
	ns     string
	pods   map[string]*testbed.NS
}

func newProxyBed(t *testing.T, mode string) *proxyBed {
	pb := newProxyNet(t)
	pb.startServer("--proxy-mode", mode, "--cluster-cidr", "10.244.0.0/16", "--loadbalancer-ip-pools", lbPool,
		"--disable", "dns,agent,ingress")
	makeNodeWithIP(t, pb.c, "node2", "zone-b", "10.100.0.9")
	return pb
}

// newProxyNet builds the bed's network: the node with its pod bridge, and
// the client outside, which is also the node's router.
func newProxyNet(t *testing.T) *proxyBed {
	b := testbed.New(t)
	pb := &proxyBed{t: t, bed: b, ns: "default", pods: map[string]*testbed.NS{}}
	pb.node = b.Namespace("node")
	pb.node.Bridge("tb0", podGateway+"/24")
	pb.client = b.Namespace("client")
	b.Link(pb.node, nodeIP+"/24", pb.client, clientIP+"/24")
	pb.client.MustRun("ip", "addr", "add", clientIP2+"/24", "dev", "eth0")
	pb.client.MustRun("ip", "route", "add", "default", "via", nodeIP)
	// A node has a default route (here the client plays its router);
	// without one a connect to a ClusterIP fails before any hook sees it.
	pb.node.MustRun("ip", "route", "add", "default", "via", clientIP)
	return pb
}

// startServer runs `portal server` in the node as node1 with args added,
// and registers node1 with the node's address.
func (pb *proxyBed) startServer(args ...string) {
	s := &framework.Server{Command: "server", DataDir: pb.t.TempDir(), Port: 6443,
		Args: append([]string{"--hostname-override", "node1", "--node-monitor-grace-period", "1h"}, args...),
		Wrap: []string{"ip", "netns", "exec", pb.node.Name},
		Dial: pb.node.DialContext,
	}
	framework.Attach(pb.t, s)
	s.Start()
	pb.server, pb.c = s, s.Client()
	makeNodeWithIP(pb.t, pb.c, "node1", "zone-a", nodeIP)
}

func makeNodeWithIP(t *testing.T, c kubernetes.Interface, name, zone, ip string) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	ctx := context.Background()
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Node IPAM writes the new Node's podCIDR meanwhile: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = node.Status
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// backend starts a pod namespace with address 10.244.0.<n> serving its
// name on 8080 (TCP and UDP), and the Pod object for it on node, labelled
// app=<app>.
func (pb *proxyBed) backend(name, app, node string, n byte, ready bool) *corev1.Pod {
	pb.t.Helper()
	ip := netip.AddrFrom4([4]byte{10, 244, 0, n})
	pod := pb.bed.Pod(name, pb.node, "tb0", ip.String()+"/24", podGateway)
	pod.Serve(name, ip, 8080)
	pb.pods[name] = pod
	return makePod(pb.t, pb.c, pb.ns, podSpec{name: name, node: node, ip: ip.String(),
		labels: map[string]string{"app": app}, ready: ready})
}

func (pb *proxyBed) service(name string, mutate func(*corev1.Service)) *corev1.Service {
	pb.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 80, TargetPort: intstr.FromInt32(8080)},
			},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	created, err := pb.c.CoreV1().Services(pb.ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		pb.t.Fatalf("create service %s: %v", name, err)
	}
	return created
}

// ask connects from ns to addr and returns the backend's name.
func ask(ns *testbed.NS, src, addr string) (string, error) {
	var from netip.Addr
	if src != "" {
		from = netip.MustParseAddr(src)
	}
	return ns.AskTCP(context.Background(), from, addr)
}

// reachable waits until a connection from ns to addr lands on a backend.
func reachable(t *testing.T, ns *testbed.NS, src, addr string) string {
	t.Helper()
	var name string
	eventually(t, "connect to "+addr, func() (bool, string) {
		got, err := ask(ns, src, addr)
		name = got
		return err == nil && got != "", fmt.Sprint(err)
	})
	return name
}

// refused waits until connections from ns to addr fail, and reports how
// (refused at once, or timing out because the packets are dropped).
func refused(t *testing.T, ns *testbed.NS, src, addr string) error {
	t.Helper()
	var last error
	eventually(t, "connections to "+addr+" fail", func() (bool, string) {
		got, err := ask(ns, src, addr)
		last = err
		return err != nil, "answered by " + got
	})
	return last
}

func hostPort(ip string, port int32) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

func TestProxy(t *testing.T) {
	for _, mode := range proxyModes {
		t.Run(mode, func(t *testing.T) { testProxy(t, mode) })
	}
}

func testProxy(t *testing.T, mode string) {
	pb := newProxyBed(t, mode)
	for i, name := range []string{"web-a", "web-b", "web-c"} {
		pb.backend(name, "web", "node1", byte(10+i), true)
	}
	web := pb.service("web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	vip := hostPort(web.Spec.ClusterIP, 80)

	t.Run("ClusterIP spreads over all backends", func(t *testing.T) {
		reachable(t, pb.node, "", vip)
		eventually(t, "all three backends in rotation", func() (bool, string) {
			counts := spread(t, pb.node, "", vip, 30)
			return len(counts) == 3, fmt.Sprint(counts)
		})
		counts := spread(t, pb.node, "", vip, 300)
		for _, name := range []string{"web-a", "web-b", "web-c"} {
			// Binomial(300, 1/3): mean 100, sd 8; 60 is five sd away.
			if counts[name] < 60 {
				t.Errorf("backend %s got %d of 300 connections, want a fair share: %v", name, counts[name], counts)
			}
		}
	})

	t.Run("NodePort from outside", func(t *testing.T) {
		reachable(t, pb.client, "", hostPort(nodeIP, web.Spec.Ports[0].NodePort))
	})

	t.Run("no endpoints rejects at once", func(t *testing.T) {
		empty := pb.service("empty", nil)
		start := time.Now()
		err := refused(t, pb.node, "", hostPort(empty.Spec.ClusterIP, 80))
		if !strings.Contains(err.Error(), "refused") {
			t.Errorf("got %v after %v, want connection refused (a reject, not a drop)", err, time.Since(start))
		}
	})

	t.Run("externalIP and LoadBalancer with source ranges", func(t *testing.T) {
		for i, name := range []string{"lb-a", "lb-b"} {
			pb.backend(name, "lb", "node1", byte(20+i), true)
		}
		lb := pb.service("lb", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalIPs = []string{externalIP}
			s.Spec.LoadBalancerSourceRanges = []string{clientIP + "/32"}
		})
		reachable(t, pb.client, clientIP, hostPort(externalIP, 80))
		var ingress string
		eventually(t, "LoadBalancer IP assigned", func() (bool, string) {
			cur, err := pb.c.CoreV1().Services(pb.ns).Get(context.Background(), lb.Name, metav1.GetOptions{})
			if err != nil || len(cur.Status.LoadBalancer.Ingress) == 0 {
				return false, fmt.Sprint(err)
			}
			ingress = cur.Status.LoadBalancer.Ingress[0].IP
			return true, ""
		})
		reachable(t, pb.client, clientIP, hostPort(ingress, 80))
		if got, err := ask(pb.client, clientIP2, hostPort(ingress, 80)); err == nil {
			t.Errorf("source %s outside loadBalancerSourceRanges reached %s", clientIP2, got)
		}
	})

	t.Run("session affinity pins a client", func(t *testing.T) {
		for i, name := range []string{"sticky-a", "sticky-b", "sticky-c"} {
			pb.backend(name, "sticky", "node1", byte(30+i), true)
		}
		sticky := pb.service("sticky", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		})
		addr := hostPort(nodeIP, sticky.Spec.Ports[0].NodePort)
		reachable(t, pb.client, clientIP, addr)
		counts := spread(t, pb.client, clientIP, addr, 30)
		if len(counts) != 1 {
			t.Errorf("one client reached %v, want a single backend", counts)
		}
	})

	t.Run("traffic policy Local without local endpoints drops", func(t *testing.T) {
		pb.backend("far-a", "far", "node2", 40, true)
		far := pb.service("far", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		})
		// Inside the cluster the remote endpoint serves; from outside
		// through this node there is no local one.
		reachable(t, pb.node, "", hostPort(far.Spec.ClusterIP, 80))
		refused(t, pb.client, "", hostPort(nodeIP, far.Spec.Ports[0].NodePort))
		internal := pb.service("far-internal", func(s *corev1.Service) {
			s.Spec.Selector = map[string]string{"app": "far"}
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		})
		refused(t, pb.node, "", hostPort(internal.Spec.ClusterIP, 80))
	})

	t.Run("healthCheckNodePort 503 then 200", func(t *testing.T) {
		pb.backend("hc-far", "hc", "node2", 50, true)
		hc := pb.service("hc", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		})
		url := fmt.Sprintf("http://%s/anything", hostPort(nodeIP, hc.Spec.HealthCheckNodePort))
		eventually(t, "health check says no local endpoints", func() (bool, string) {
			code, body := httpGet(pb.client, url)
			return code == http.StatusServiceUnavailable, fmt.Sprint(code, body)
		})
		pb.backend("hc-near", "hc", "node1", 51, true)
		eventually(t, "health check counts the local endpoint", func() (bool, string) {
			code, body := httpGet(pb.client, url)
			var got struct{ LocalEndpoints int }
			json.Unmarshal([]byte(body), &got)
			return code == http.StatusOK && got.LocalEndpoints == 1, fmt.Sprint(code, body)
		})
	})

	t.Run("UDP through a ClusterIP, flow moves off a removed backend", func(t *testing.T) {
		testUDPFlowMoves(t, pb, web)
	})

	t.Run("not-ready backend leaves rotation", func(t *testing.T) {
		pod, err := pb.c.CoreV1().Pods(pb.ns).Get(context.Background(), "web-c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setPodStatus(t, pb.c, pod, "10.244.0.12", false)
		start := time.Now()
		// A round ends at web-c's first answer, so the time of its last
		// answer is known to one connection (a whole spread of 30 takes
		// about 0.6 s in userspace mode and would blur it).
		var last time.Duration
		eventually(t, "web-c out of rotation", func() (bool, string) {
			counts := map[string]int{}
			for range 30 {
				got, err := ask(pb.node, "", vip)
				if err != nil {
					got = "error: " + err.Error()
				}
				counts[got]++
				if got == "web-c" {
					last = time.Since(start)
					return false, fmt.Sprint(counts)
				}
				if got != "web-a" && got != "web-b" {
					// A failure is not "out of rotation": the
					// others must still answer.
					return false, fmt.Sprint(counts)
				}
			}
			return true, fmt.Sprint(counts)
		})
		t.Logf("not-ready backend: last answer %v after it turned not-ready (0: none), 30 connections in a row without it by %v",
			last.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
		// The userspace mode syncs at most every 100ms (its
		// --min-sync-period default); the kernel modes' 1s lets a change
		// that follows another wait up to that second.
		if mode == "userspace" && last > time.Second {
			t.Errorf("not-ready backend answered %v after it turned not-ready, want within 1s", last)
		}
		setPodStatus(t, pb.c, pod, "10.244.0.12", true)
	})

	t.Run("works again after a restart", func(t *testing.T) {
		pb.server.Stop()
		// The kernel keeps the rules while the proxy is away; a userspace
		// proxy is its data path, and nothing answers while it is down.
		if _, err := ask(pb.node, "", vip); err != nil && mode != "userspace" {
			t.Errorf("ClusterIP while the server is down: %v", err)
		}
		pb.server.Start()
		pb.c = pb.server.Client()
		after := pb.service("after-restart", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "web"} })
		reachable(t, pb.node, "", hostPort(after.Spec.ClusterIP, 80))
		eventually(t, "all three backends again", func() (bool, string) {
			counts := spread(t, pb.node, "", vip, 30)
			return len(counts) == 3, fmt.Sprint(counts)
		})
	})
}

// spread makes n connections and counts the backends that answered.
func spread(t *testing.T, ns *testbed.NS, src, addr string, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for range n {
		got, err := ask(ns, src, addr)
		if err != nil {
			got = "error: " + err.Error()
		}
		counts[got]++
	}
	return counts
}

func httpGet(ns *testbed.NS, url string) (int, string) {
	return clientGet(&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: ns.DialContext}}, url)
}

// clientGet fetches url with c and returns the status code and body; 0
// and the error when there is no answer.
func clientGet(c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// testUDPFlowMoves pins kubernetes issues 19029/59368: a UDP client that
// keeps its source port keeps one conntrack entry; when its backend leaves,
// the proxy must delete that entry so the next datagram picks a live one.
func testUDPFlowMoves(t *testing.T, pb *proxyBed, web *corev1.Service) {
	u, err := pb.node.UDPClient(hostPort(web.Spec.ClusterIP, 80), 40000)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	var first string
	eventually(t, "UDP answer through the ClusterIP", func() (bool, string) {
		first, err = u.Ask(500 * time.Millisecond)
		return err == nil, fmt.Sprint(err)
	})
	for range 5 {
		if got, err := u.Ask(500 * time.Millisecond); err != nil || got != first {
			t.Fatalf("one UDP flow answered by %q (%v), then %q: a flow must stay on its backend", first, err, got)
		}
	}
	// Take the backend out of the Service (the pod leaves the selector), as
	// a rolling update does, while the client keeps sending.
	pod, err := pb.c.CoreV1().Pods(pb.ns).Get(context.Background(), first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Labels["app"] = "gone"
	if _, err := pb.c.CoreV1().Pods(pb.ns).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the same UDP flow answered by another backend", func() (bool, string) {
		got, err := u.Ask(300 * time.Millisecond)
		return err == nil && got != first, fmt.Sprintf("%q %v", got, err)
	})
	cur, _ := pb.c.CoreV1().Pods(pb.ns).Get(context.Background(), first, metav1.GetOptions{})
	cur.Labels["app"] = "web"
	if _, err := pb.c.CoreV1().Pods(pb.ns).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
