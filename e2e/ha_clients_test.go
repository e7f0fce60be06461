package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"portal.dev/portal/e2e/framework"
	"portal.dev/portal/e2e/testbed"
)

// sharedEtcdServer is a `portal server` that stores in the embedded etcd
// of first, with first's CA, as a second server of the same cluster. It
// stands in for a server that joined first's etcd cluster.
func sharedEtcdServer(t *testing.T, first *framework.Server, args ...string) *framework.Server {
	t.Helper()
	pki := filepath.Join(first.DataDir, "pki")
	s := &framework.Server{Command: "server", DataDir: t.TempDir(), Port: framework.FreePort(t)}
	os.MkdirAll(filepath.Join(s.DataDir, "pki"), 0o700)
	for _, f := range []string{"ca.crt", "ca.key"} {
		data, err := os.ReadFile(filepath.Join(pki, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(s.DataDir, "pki", f), data, 0o600)
	}
	ports, err := os.ReadFile(filepath.Join(first.DataDir, "etcd-ports"))
	if err != nil {
		t.Fatal(err)
	}
	s.Args = append([]string{"--etcd-servers", "https://127.0.0.1:" + strings.Fields(string(ports))[0],
		"--etcd-cafile", filepath.Join(pki, "etcd", "ca.crt"),
		"--etcd-certfile", filepath.Join(pki, "etcd", "apiserver-client.crt"),
		"--etcd-keyfile", filepath.Join(pki, "etcd", "apiserver-client.key")}, args...)
	framework.Attach(t, s)
	s.Start()
	return s
}

// fakeKubelet gives every pod of app on the test's node an address and
// makes it ready, as an agent would, until ctx ends: the controllers are
// under test here, not the agent.
func fakeKubelet(ctx context.Context, c kubernetes.Interface, app string) {
	var next atomic.Int32
	for ctx.Err() == nil {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err == nil {
			for _, p := range pods.Items {
				if p.Status.PodIP != "" || p.DeletionTimestamp != nil {
					continue
				}
				ip := fmt.Sprintf("10.9.1.%d", next.Add(1))
				p.Status.Phase = corev1.PodRunning
				p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
				c.CoreV1().Pods("default").UpdateStatus(ctx, &p, metav1.UpdateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestHAControllerLeaderKilled: three server nodes of one embedded etcd
// cluster; the node whose controllers hold the Lease is killed with -9.
// Another takes the Lease within --leader-elect-lease-duration + 3 s, and
// a Pod deleted right after the kill is replaced in its Service's
// EndpointSlices within that time + 1 s.
func TestHAControllerLeaderKilled(t *testing.T) {
	// Portal's default lease. client-go's follower takes the Lease at its
	// first look after having seen no renewal for the lease duration; it
	// looks every retry period stretched by up to 2.2x, and the renewal it
	// saw last may be that old again, so it takes over within the lease
	// duration plus 4.4 retry periods. A 400 ms retry period keeps that
	// within the lease duration + 2 s (the default 1 s allows 4.4 s). The
	// killed node may also hold etcd's leadership, and the takeover's
	// write then waits for etcd's election too: the test allows 1 s more.
	const leaseDuration = 8 * time.Second
	b := newHABed(t, 3)
	b.ServerArgs = append(b.ServerArgs, "--leader-elect-lease-duration", leaseDuration.String(),
		"--leader-elect-retry-period", "400ms")
	b.Init("--identity", b.Nodes[0].Name)
	for _, n := range b.Nodes[1:] {
		b.Join(n, "--identity", n.Name)
	}
	worker := b.AddWorker()
	load := worker.StartLoad()
	defer load.Stop()
	nodes := map[string]*haNode{}
	for _, n := range b.Nodes {
		nodes[n.Name] = n
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := func(c kubernetes.Interface) string {
		lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "portal-controller-manager", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	first := b.Nodes[0].Server.Client()
	eventually(t, "a leader", func() (bool, string) { h := holder(first); return nodes[h] != nil, h })
	leader := nodes[holder(first)]
	// The test talks to a server that survives.
	var c kubernetes.Interface
	for _, n := range b.Nodes {
		if n != leader {
			c = n.Server.Client()
			break
		}
	}
	eventually(t, "the kubernetes Service lists the three servers", func() (bool, string) {
		slice, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(slice.Endpoints) == 3, fmt.Sprint(slice.Endpoints)
	})

	makeNode(t, c, "n1", "zone-a")
	if _, err := c.CoreV1().Services("default").Create(ctx, service("ha"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "ha"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ha"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "none", Command: []string{"sleep"}}}}}},
	}
	if _, err := c.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go fakeKubelet(ctx, c, "ha")
	eventually(t, "two endpoints", func() (bool, string) {
		eps, _ := endpointsOf(t, c, "default", "ha")
		return len(eps) == 2, fmt.Sprint(len(eps))
	})
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=ha"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods: %v %v", pods, err)
	}
	victim := pods.Items[0]

	leader.Server.Kill()
	killed := time.Now()
	// The node may have held the etcd leader too: writes fail until etcd
	// elects another, so the delete is retried.
	eventuallyWithin(t, 10*time.Second, "delete a pod after the kill", func() (bool, string) {
		err := c.CoreV1().Pods("default").Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("pod %s deleted %v after the kill", victim.Name, time.Since(killed).Round(10*time.Millisecond))
	var takeover, replaced time.Duration
	eventuallyWithin(t, leaseDuration+20*time.Second, "a new leader and the pod replaced", func() (bool, string) {
		if h := holder(c); takeover == 0 && h != "" && h != leader.Name {
			takeover = time.Since(killed)
		}
		if replaced == 0 {
			eps, _ := endpointsOf(t, c, "default", "ha")
			if _, old := eps[victim.Status.PodIP]; len(eps) == 2 && !old {
				replaced = time.Since(killed)
			}
		}
		return takeover > 0 && replaced > 0, fmt.Sprintf("takeover %v, replaced %v", takeover, replaced)
	})
	t.Logf("leader %s killed: another took the Lease after %v, the deleted pod was replaced in the EndpointSlices after %v (lease duration %v)",
		leader.Name, takeover.Round(10*time.Millisecond), replaced.Round(10*time.Millisecond), leaseDuration)
	if limit := leaseDuration + 3*time.Second; takeover > limit {
		t.Errorf("takeover took %v, want at most %v", takeover, limit)
	}
	if limit := leaseDuration + 4*time.Second; replaced > limit {
		t.Errorf("replacement in the EndpointSlices took %v, want at most %v", replaced, limit)
	}
	load.CheckNoFailures(t, 20)
}

// askDNS asks server, from ns, for name's A record and wants the one
// address ip.
func askDNS(ctx context.Context, ns *testbed.NS, server, name, ip string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := ns.DialContext(ctx, "udp", server)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	dc := &dns.Conn{Conn: conn}
	if err := dc.WriteMsg(m); err != nil {
		return err
	}
	r, err := dc.ReadMsg()
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != ip {
		return fmt.Errorf("answer %v, want %s", r.Answer[0], ip)
	}
	return nil
}

// TestHAEveryAPIServerDown: three server nodes and a worker whose agent,
// proxy and DNS run as processes of their own; every API server is stopped
// for 30 s. Requests from the client through a ClusterIP and a NodePort
// and DNS queries for the Service's name keep succeeding throughout; once
// the servers are back a Service created afterwards is served within 2 s,
// and the agent reports the same pods, not restarted, still ready.
func TestHAEveryAPIServerDown(t *testing.T) {
	b := newHABed(t, 3)
	b.Start()
	w := b.AddWorker()
	dnsServer := w.StartDNS()
	c := b.clientAt(b.Nodes[0], b.Nodes[0])
	web, err := c.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const dnsName = "web.default.svc.cluster.local."
	eventually(t, "DNS answers for web", func() (bool, string) {
		err := askDNS(context.Background(), w.Client, dnsServer, dnsName, web.Spec.ClusterIP)
		return err == nil, fmt.Sprint(err)
	})
	p := w.StartLoad(probeCheck{"DNS", func(ctx context.Context) error {
		return askDNS(ctx, w.Client, dnsServer, dnsName, web.Spec.ClusterIP)
	}})
	defer p.Stop()
	before, err := c.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range b.Nodes {
		n.Server.Stop()
	}
	stopped := time.Now()
	time.Sleep(30 * time.Second)
	// Each server is ready only once its etcd has quorum: start them
	// together.
	for _, n := range b.Nodes {
		n.Server.Launch()
	}
	for _, n := range b.Nodes {
		n.Server.WaitReady(90 * time.Second)
	}
	t.Logf("every API server down for %v", time.Since(stopped).Round(100*time.Millisecond))

	created := time.Now()
	after := service("after")
	after.Spec.Selector = map[string]string{"app": "web"}
	after.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	after, err = c.CoreV1().Services("default").Create(context.Background(), after, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var served time.Duration
	eventuallyWithin(t, 20*time.Second, "the Service created after the API returned is served", func() (bool, string) {
		// A short timeout per attempt: a connection tried before the
		// rules exist hangs, and its timeout is the resolution of the
		// figure.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := w.get(ctx, hostPort(after.Spec.ClusterIP, after.Spec.Ports[0].Port))
		if err == nil {
			served = time.Since(created)
		}
		return err == nil, fmt.Sprint(err)
	})
	// Some more requests after the catch-up, which must not flush anything.
	time.Sleep(3 * time.Second)
	t.Logf("a Service created after the API returned was served after %v", served.Round(10*time.Millisecond))
	p.CheckNoFailures(t, 100)
	if served > 2*time.Second {
		t.Errorf("the new Service was served after %v, want within 2s", served)
	}
	checkPodKept(t, c, before, stopped.Add(30*time.Second))
}

// checkPodKept waits for the agent of before's node to renew its Lease
// after since (it has reconnected and reported), then fails the test
// unless the pod is the same one with the same container run, not
// restarted, and ready.
func checkPodKept(t *testing.T, c kubernetes.Interface, before *corev1.Pod, since time.Time) {
	t.Helper()
	ctx := context.Background()
	node := before.Spec.NodeName
	eventuallyWithin(t, 60*time.Second, node+"'s Lease renewed after the API returned", func() (bool, string) {
		lease, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil {
			return false, fmt.Sprint(err)
		}
		return lease.Spec.RenewTime.After(since), lease.Spec.RenewTime.String()
	})
	after, err := c.CoreV1().Pods(before.Namespace).Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil || after.UID != before.UID {
		t.Fatalf("pod %s after the outage: %v, want the same pod (UID %s)", before.Name, err, before.UID)
	}
	started := before.Status.ContainerStatuses[0].State.Running.StartedAt
	cs := after.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || cs.State.Running == nil || !cs.State.Running.StartedAt.Equal(&started) || !podReady(after) {
		t.Errorf("container of %s after the outage: restarts %d, state %+v, ready %v; want the one started at %v, running, ready",
			before.Name, cs.RestartCount, cs.State, podReady(after), started)
		return
	}
	t.Logf("pod %s after the outage: the same container, started at %v, not restarted, ready", before.Name, started.UTC().Format(time.RFC3339))
}

// TestHAClientFollowsAnotherAPIServer: a DNS server started with the
// kubeconfig of one API server and --server naming another keeps serving
// new Services after the first is killed: its load balancer moves its
// watches to the other server.
func TestHAClientFollowsAnotherAPIServer(t *testing.T) {
	first := framework.StartServer(t, "--disable", "dns")
	second := sharedEtcdServer(t, first, "--disable", "dns,controllers")
	port := fmt.Sprint(framework.FreePort(t))
	proc := framework.StartProcess(t, t.TempDir(), "dns", "--kubeconfig", second.UserKubeconfig(t, "system:kube-dns", second.URL()),
		"--server", first.URL(), "--dns-bind-address", "127.0.0.1", "--dns-port", port, "--upstream", "none",
		"--health-bind-address", "", "--ready-bind-address", "", "--metrics-bind-address", "", "-v=2")
	lookup := func(name string) []string {
		out, err := exec.Command("dig", "@127.0.0.1", "-p", port, "+time=1", "+tries=1", "+short", name).CombinedOutput()
		if err != nil {
			return []string{err.Error()}
		}
		return strings.Fields(string(out))
	}
	c := first.Client()
	ctx := context.Background()
	create := func(name string) string {
		svc, err := c.CoreV1().Services("default").Create(ctx, service(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc.Spec.ClusterIP
	}
	ip := create("before")
	eventually(t, "DNS answers for before", func() (bool, string) {
		got := lookup("before.default.svc.cluster.local")
		return len(got) == 1 && got[0] == ip, fmt.Sprint(got)
	})

	// client-go's reflector logs this (at -v=2) after every full list.
	lists := func() int {
		data, _ := os.ReadFile(proc.Log)
		return strings.Count(string(data), "Caches populated")
	}
	// client-go counts a watch that ends within its first second as
	// failed and lists again; the watches a failover ends are older.
	time.Sleep(2 * time.Second)
	listsBefore := lists()
	second.Kill()
	killed := time.Now()
	ip = create("after")
	eventuallyWithin(t, 30*time.Second, "DNS answers for a Service created after its API server died", func() (bool, string) {
		got := lookup("after.default.svc.cluster.local")
		return len(got) == 1 && got[0] == ip, fmt.Sprint(got)
	})
	took := time.Since(killed)
	t.Logf("a Service created after the DNS server's API server was killed was answered after %v", took.Round(10*time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("took %v, want at most 10s", took)
	}
	// The watches resumed on the other server from their resourceVersion.
	if got := lists() - listsBefore; got != 0 {
		t.Errorf("the DNS server listed %d times after the failover, want 0 (watches resume)", got)
	}
}
