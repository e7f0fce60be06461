package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"portal.dev/portal/e2e/framework"
)

func nodePortService(name string) *corev1.Service {
	s := service(name)
	s.Spec.Type = corev1.ServiceTypeNodePort
	return s
}

// etcdOf opens the embedded etcd of a server's data directory, to look at
// the reservations behind the API.
func etcdOf(t *testing.T, s *framework.Server) *clientv3.Client {
	t.Helper()
	ports, err := os.ReadFile(filepath.Join(s.DataDir, "etcd-ports"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.DataDir, "pki", "etcd")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "apiserver-client.crt"), filepath.Join(dir, "apiserver-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{"https://127.0.0.1:" + strings.Fields(string(ports))[0]},
		TLS:       &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}, DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// reservations returns the recorded reservations: key -> owner.
func reservations(t *testing.T, c *clientv3.Client) map[string]string {
	t.Helper()
	resp, err := c.Get(context.Background(), "/registry/portal.dev/allocations/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), "/registry/portal.dev/allocations/")] = string(kv.Value)
	}
	return out
}

// wantedReservations is what the Services that exist should hold.
func wantedReservations(t *testing.T, client kubernetes.Interface) map[string]string {
	t.Helper()
	list, err := client.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		owner := s.Namespace + "/" + s.Name
		for _, ip := range s.Spec.ClusterIPs {
			if ip != "None" {
				if prev, dup := out["ip/"+ip]; dup {
					t.Errorf("cluster IP %s held by %s and %s", ip, prev, owner)
				}
				out["ip/"+ip] = owner
			}
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				if prev, dup := out[fmt.Sprint("port/", p.NodePort)]; dup && prev != owner {
					t.Errorf("node port %d held by %s and %s", p.NodePort, prev, owner)
				}
				out[fmt.Sprint("port/", p.NodePort)] = owner
			}
		}
	}
	return out
}

func createConcurrently(client kubernetes.Interface, prefix string, n int) (created []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("%s-%d", prefix, i)
			if _, err := client.CoreV1().Services("default").Create(context.Background(), nodePortService(name), metav1.CreateOptions{}); err == nil {
				mu.Lock()
				created = append(created, name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return created
}

// TestConcurrentAllocation: 50 Services created at once get 50 distinct
// cluster IPs and node ports, and the reservations match them exactly.
func TestConcurrentAllocation(t *testing.T) {
	s := framework.StartServer(t)
	client := s.Client()
	if got := createConcurrently(client, "c", 50); len(got) != 50 {
		t.Fatalf("created %d of 50", len(got))
	}
	want := wantedReservations(t, client)
	if n := len(want); n != 101 { // 50 IPs + 50 ports + the kubernetes Service's IP
		t.Fatalf("services hold %d distinct items, want 101", n)
	}
	assertReservationsMatch(t, reservations(t, etcdOf(t, s)), want)
}

func assertReservationsMatch(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, owner := range want {
		if got[k] != owner {
			t.Errorf("%s: recorded for %q, held by %q", k, got[k], owner)
		}
	}
	for k, owner := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: recorded for %q, held by no Service (leak)", k, owner)
		}
	}
}

// TestAllocationSurvivesKill9: kill -9 while Services are being created
// leaves no duplicate, and after repair no leak either.
func TestAllocationSurvivesKill9(t *testing.T) {
	// Repair every second, freeing what no Service held for 3 s: safe
	// here because no create is in flight while the leaks are checked.
	s := framework.StartServer(t, "--service-repair-interval", "1s", "--service-leak-grace", "3s")
	client := s.Client()
	done := make(chan []string)
	go func() { done <- createConcurrently(client, "k", 200) }()
	waitFor(t, 30*time.Second, func() bool {
		list, err := client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
		return err == nil && len(list.Items) > 40
	})
	s.Kill()
	<-done
	s.Start()
	client = s.Client()
	etcd := etcdOf(t, s)
	// Repair frees what the crash left reserved within a few seconds.
	var got, want map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, want = reservations(t, etcd), wantedReservations(t, client)
		if len(got) == len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	assertReservationsMatch(t, got, want)
	// And allocation goes on without handing out anything twice.
	createConcurrently(client, "after", 20)
	wantedReservations(t, client) // fails the test on a duplicate
}

// TestAllocationLifecycle: what a Service stops needing is given back, so
// another Service can ask for exactly that address or port.
func TestAllocationLifecycle(t *testing.T) {
	s := framework.StartServer(t)
	k := func(args ...string) string { t.Helper(); return s.MustKubectl(args...) }
	get := func(name, path string) string { t.Helper(); return k("get", "svc", name, "-o", "jsonpath="+path) }

	// NodePort -> ClusterIP frees the node port.
	k("create", "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30100")
	k("patch", "svc", "np", "--type=json", "-p", `[{"op":"replace","path":"/spec/type","value":"ClusterIP"},{"op":"remove","path":"/spec/ports/0/nodePort"}]`)
	k("create", "service", "nodeport", "np-again", "--tcp=80:8080", "--node-port=30100")

	// ClusterIP -> ExternalName frees the cluster IP.
	k("create", "service", "clusterip", "fixed", "--tcp=80", "--clusterip=10.96.0.77")
	k("patch", "svc", "fixed", "--type=merge", "-p", `{"spec":{"type":"ExternalName","externalName":"example.com","clusterIP":"","clusterIPs":null}}`)
	k("create", "service", "clusterip", "fixed-again", "--tcp=80", "--clusterip=10.96.0.77")

	// LoadBalancer with allocateLoadBalancerNodePorts false holds none;
	// Local gets a health check node port, released when the policy goes.
	s.MustKubectlStdin(`apiVersion: v1
kind: Service
metadata: {name: lb}
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  externalTrafficPolicy: Local
  selector: {app: lb}
  ports: [{name: http, port: 80}]
`, "apply", "-f", "-")
	if got := get("lb", "{.spec.ports[0].nodePort}"); got != "" {
		t.Fatalf("allocateLoadBalancerNodePorts false: got node port %q, want none", got)
	}
	hc := get("lb", "{.spec.healthCheckNodePort}")
	if hc == "" || hc == "0" {
		t.Fatal("LoadBalancer with externalTrafficPolicy Local got no healthCheckNodePort")
	}
	k("patch", "svc", "lb", "--type=merge", "-p", `{"spec":{"externalTrafficPolicy":"Cluster"}}`)
	if got := get("lb", "{.spec.healthCheckNodePort}"); got != "" {
		t.Fatalf("after Local -> Cluster: healthCheckNodePort %q, want released", got)
	}
	k("create", "service", "nodeport", "takes-hc", "--tcp=81:8080", "--node-port="+hc)

	// Deleting frees everything.
	k("delete", "svc", "np-again", "fixed-again")
	k("create", "service", "nodeport", "np-third", "--tcp=80:8080", "--node-port=30100")
	k("create", "service", "clusterip", "fixed-third", "--tcp=80", "--clusterip=10.96.0.77")
}

// TestRepairReportsOutOfRange: after the service range changes under
// existing Services, repair reports each address outside it as an Event on
// its Service.
func TestRepairReportsOutOfRange(t *testing.T) {
	s := framework.StartServer(t)
	s.MustKubectl("create", "service", "clusterip", "old-range", "--tcp=80", "--clusterip=10.96.5.5")
	s.Stop()
	s.Args = []string{"--service-cluster-ip-range", "10.200.0.0/16"}
	s.Start()
	waitFor(t, 30*time.Second, func() bool {
		out, err := s.Kubectl("get", "events", "--field-selector", "involvedObject.name=old-range,reason=ClusterIPOutOfRange", "-o", "name")
		return err == nil && strings.TrimSpace(out) != ""
	})
}

// TestAllocationRefusesReservedAddresses pins the bug of issue #16: a
// Service could ask for the network address (10.96.0.0) or the broadcast
// address (10.111.255.255) of the default range. Like upstream, the API
// refuses the first and last address of every IPv4 range, and the first
// (subnet-router anycast) address of every IPv6 range, with a 422 on
// spec.clusterIPs; the addresses next to them (the first host address
// being the kubernetes Service's), and the last of an IPv6 range, may be
// had.
func TestAllocationRefusesReservedAddresses(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		refused   []string
		allocable []string
	}{{
		name:      "default range",
		refused:   []string{"10.96.0.0", "10.111.255.255"},
		allocable: []string{"10.96.0.2", "10.111.255.254"},
	}, {
		name:      "configured dual-stack ranges",
		args:      []string{"--service-cluster-ip-range", "10.100.0.0/24,fd00:10:96::/112"},
		refused:   []string{"10.100.0.0", "10.100.0.255", "fd00:10:96::"},
		allocable: []string{"10.100.0.254", "fd00:10:96::1", "fd00:10:96::ffff"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := framework.StartServer(t, tc.args...)
			for i, ip := range tc.refused {
				out, err := s.Kubectl("create", "service", "clusterip", fmt.Sprint("refused-", i), "--tcp=80", "--clusterip="+ip)
				checkInvalid(t, out, err, []string{"spec.clusterIPs: Invalid value", "failed to allocate IP " + ip})
			}
			for i, ip := range tc.allocable {
				if out, err := s.Kubectl("create", "service", "clusterip", fmt.Sprint("allocable-", i), "--tcp=80", "--clusterip="+ip); err != nil {
					t.Errorf("cluster IP %s: got %v (%s), want it created", ip, err, strings.TrimSpace(out))
				}
			}
		})
	}
}
